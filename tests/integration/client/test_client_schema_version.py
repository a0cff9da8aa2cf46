"""A client checks its schema's migrations when it opens: behind is refused with
``SchemaNotMigrated`` naming the missing migrations; ahead (a newer release) is accepted."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from contracts.provision import create_migrated_schema, drop_test_schema, fresh_schema_name
from tests.integration.client.client_actors import Pair, add
from tests.integration.client.pools import caller_pool
from tests.integration.worker.support import Database

from taskq import JobsClient, JobStatus, SchemaNotMigrated
from taskq.adapters.postgres.migrator import discover_migrations

pytestmark = pytest.mark.integration

KNOWN = [m.version for m in discover_migrations()]
#: The partly migrated schema stops here: the migrations after it are missing.
PARTIAL = KNOWN[-3]
MISSING = [f"{v:04d}" for v in KNOWN if v > PARTIAL]


@pytest.fixture
async def behind(db: Database) -> AsyncIterator[Database]:
    """A schema migrated up to ``PARTIAL`` only (the test server, the test's driver)."""
    schema = fresh_schema_name("taskq_clold")
    await create_migrated_schema(db.dsn, schema, target=PARTIAL)
    try:
        yield Database(db.dsn, schema, db.driver)
    finally:
        await drop_test_schema(db.dsn, schema)


async def jobs_in(dsn: str, schema: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(f"SELECT count(*) FROM {schema}.jobs"))
    finally:
        await conn.close()


def assert_names_missing(exc: SchemaNotMigrated, schema: str) -> None:
    message = str(exc)
    assert schema in message
    assert f"missing: {', '.join(MISSING)}" in message, message
    assert "taskq migrate up" in message


async def test_connect_refuses_a_schema_behind_the_code(behind: Database) -> None:
    """JobsClient.connect fails at open, naming the missing migrations (before, it opened
    and enqueued into the old schema)."""
    with pytest.raises(SchemaNotMigrated) as caught:
        async with JobsClient.connect(settings=behind.settings()):
            pytest.fail("the client opened on a schema behind its code")
    assert_names_missing(caught.value, behind.schema)


async def test_callers_pool_refuses_a_schema_behind_the_code(behind: Database) -> None:
    """A client on the caller's pool checks before its first call: enqueue, get and an
    enqueue on the caller's connection all fail naming the missing migrations, and
    nothing is written."""
    async with caller_pool(behind.driver, behind.dsn) as app:
        client = app.client(behind.schema)
        with pytest.raises(SchemaNotMigrated) as caught:
            await client.enqueue(add, Pair(a=1, b=2))
        assert_names_missing(caught.value, behind.schema)
        with pytest.raises(SchemaNotMigrated):
            await client.get(1)
        async with app.transaction() as conn:
            with pytest.raises(SchemaNotMigrated) as in_tx:
                await client.enqueue(add, Pair(a=1, b=2), connection=conn)
        assert_names_missing(in_tx.value, behind.schema)
        await client.aclose()
        assert app.is_open()
    assert await jobs_in(behind.dsn, behind.schema) == 0


async def test_the_check_passes_once_the_schema_is_migrated(behind: Database) -> None:
    """After `migrate up` the same caller's-pool client goes on: a failed check is retried."""
    async with caller_pool(behind.driver, behind.dsn) as app:
        client = app.client(behind.schema)
        with pytest.raises(SchemaNotMigrated):
            await client.enqueue(add, Pair(a=1, b=2))
        await create_migrated_schema(behind.dsn, behind.schema)
        handle = await client.enqueue(add, Pair(a=1, b=2))
        assert (await handle.status()) is JobStatus.PENDING


async def test_fully_migrated_schema_works(db: Database) -> None:
    """Own pool and caller's pool (and its connection) enqueue on a current schema."""
    async with JobsClient.connect(settings=db.settings()) as client:
        await client.enqueue(add, Pair(a=1, b=2))
    async with caller_pool(db.driver, db.dsn) as app:
        client = app.client(db.schema)
        await client.enqueue(add, Pair(a=3, b=4))
        async with app.transaction() as conn:
            await client.enqueue(add, Pair(a=5, b=6), connection=conn)
    assert await jobs_in(db.dsn, db.schema) == 3


async def test_schema_ahead_of_the_code_is_accepted(db: Database) -> None:
    """A migration this TaskQ does not know (a newer release applied it, then was rolled
    back) does not stop a client: migrations only add."""
    conn = await asyncpg.connect(db.dsn)
    try:
        await conn.execute(
            f"INSERT INTO {db.schema}.schema_migrations (version, name, checksum) "
            "VALUES (9999, 'from_the_future', 'x')"
        )
    finally:
        await conn.close()
    async with JobsClient.connect(settings=db.settings()) as client:
        await client.enqueue(add, Pair(a=1, b=2))
    async with caller_pool(db.driver, db.dsn) as app:
        await app.client(db.schema).enqueue(add, Pair(a=1, b=2))
    assert await jobs_in(db.dsn, db.schema) == 2


async def test_a_schema_never_migrated_is_refused_at_open(db: Database) -> None:
    """A schema name with no TaskQ tables (a typo in TASKQ_SCHEMA_NAME) fails at open."""
    missing = Database(db.dsn, fresh_schema_name("taskq_clnone"), db.driver)
    with pytest.raises(SchemaNotMigrated, match="taskq migrate up"):
        async with JobsClient.connect(settings=missing.settings()):
            pytest.fail("the client opened on a schema that does not exist")
