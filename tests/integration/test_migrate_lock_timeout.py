"""`taskq migrate` bounds its DDL lock waits: a long transaction on jobs fails it, not the cluster.

A migration that alters a busy table waits for an exclusive lock, and every
reader and writer of that table queues behind its request. Each migration's
transaction therefore carries a transaction-local ``lock_timeout``: behind a
session that holds the jobs table, the migration fails with an error naming
the problem and that session, is rolled back, and writes go on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from contracts.provision import (
    NoTestDatabase,
    create_migrated_schema,
    drop_test_schema,
    fresh_schema_name,
    resolve_test_dsn,
)
from tests.integration.test_migrate_cli import taskq

from taskq.adapters.asyncpg import migrate
from taskq.adapters.postgres.migrator import discover_migrations
from taskq.adapters.postgres.schema import Schema
from taskq.app.composition import migrate_up
from taskq.domain.errors import MigrationError

pytestmark = pytest.mark.integration

#: The last migration alters jobs, job_attempts or queues; the tests stop before it.
LAST = discover_migrations()[-1]
BEFORE_LAST = discover_migrations()[-2].version
#: Bound on anything that would hang forever if the lock wait were unbounded.
HANG = 30.0


@pytest.fixture(scope="module")
def dsn() -> str:
    try:
        return resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


@pytest.fixture
async def schema(dsn: str) -> AsyncIterator[Schema]:
    """A schema migrated up to (not including) the last migration, dropped after the test."""
    name = fresh_schema_name("taskq_mlock")
    await create_migrated_schema(dsn, name, target=BEFORE_LAST)
    yield Schema(name)
    await drop_test_schema(dsn, name)


@pytest.fixture
async def holder(dsn: str, schema: Schema) -> AsyncIterator[Any]:
    """A session idle in a transaction that has written to jobs, job_attempts and queues: it
    holds ROW EXCLUSIVE on each, which every migration that alters them or builds an index
    on them waits for (the last migration may alter any of them)."""
    conn = await asyncpg.connect(dsn)
    tx = conn.transaction()
    await tx.start()
    await conn.execute(f"UPDATE {schema.quoted}.jobs SET priority = priority WHERE false")
    await conn.execute(f"UPDATE {schema.quoted}.job_attempts SET attempt = attempt WHERE false")
    await conn.execute(f"UPDATE {schema.quoted}.queues SET mode = mode WHERE false")
    try:
        yield conn
    finally:
        await tx.rollback()
        await conn.close()


async def applied_versions(dsn: str, schema: Schema) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(f"SELECT version FROM {schema.quoted}.schema_migrations")
    finally:
        await conn.close()
    return sorted(r["version"] for r in rows)


async def test_a_migration_behind_a_long_transaction_fails_naming_it(
    dsn: str, schema: Schema, holder: Any
) -> None:
    """Behind a session holding jobs, upgrade fails (not hangs), names the session, rolls back."""
    holder_pid = holder.get_server_pid()
    async with migrate.open_connection(dsn) as conn:
        before = await conn.fetchval("SHOW lock_timeout")
        with pytest.raises(MigrationError) as failed:
            await asyncio.wait_for(
                migrate.upgrade(conn, schema, lock_timeout=timedelta(milliseconds=200)), HANG
            )
        message = str(failed.value)
        assert f"migration {LAST.up_file} gave up waiting for a table lock after 0.2s" in message
        assert "rolled back" in message
        assert f"pid {holder_pid} (idle in transaction" in message
        assert "on jobs" in message or "on job_attempts" in message
        # The budget was local to the migration's transaction.
        assert await conn.fetchval("SHOW lock_timeout") == before
    assert await applied_versions(dsn, schema) == list(range(1, BEFORE_LAST + 1))
    # The holder is untouched, and writers are not stuck behind a waiting migration.
    assert await holder.fetchval("SELECT 6 * 7") == 42
    writer = await asyncpg.connect(dsn)
    try:
        await asyncio.wait_for(
            writer.execute(
                f"INSERT INTO {schema.quoted}.jobs (queue, actor, status) "
                "VALUES ('default', 'a', 'pending')"
            ),
            HANG,
        )
    finally:
        await writer.close()


async def test_the_migration_applies_once_the_transaction_ends(
    dsn: str, schema: Schema, holder: Any
) -> None:
    """After the holder's transaction ends, the same upgrade applies the migration."""
    async with migrate.open_connection(dsn) as conn:
        with pytest.raises(MigrationError, match="gave up waiting for a table lock"):
            await asyncio.wait_for(
                migrate.upgrade(conn, schema, lock_timeout=timedelta(milliseconds=100)), HANG
            )
        await holder.execute("ROLLBACK")
        applied = await asyncio.wait_for(migrate.upgrade(conn, schema), HANG)
    assert [m.version for m in applied] == [LAST.version]
    assert await applied_versions(dsn, schema) == [m.version for m in discover_migrations()]


async def test_a_concurrent_run_still_waits_for_the_migration_lock(
    dsn: str, schema: Schema
) -> None:
    """The budget is not on the advisory lock: a run waits for another run past lock_timeout."""
    other = await asyncpg.connect(dsn)
    key = schema.lock_key("migrate")
    await other.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", key)
    try:
        async with migrate.open_connection(dsn) as conn:
            run = asyncio.create_task(
                migrate.upgrade(conn, schema, lock_timeout=timedelta(milliseconds=50))
            )
            pid = conn.get_server_pid()
            waiting = (
                "SELECT EXISTS (SELECT 1 FROM pg_locks"
                " WHERE pid = $1 AND locktype = 'advisory' AND NOT granted)"
            )
            while not await other.fetchval(waiting, pid):
                assert not run.done(), run
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)  # six lock budgets: a bounded wait would have failed
            assert not run.done()
            await other.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", key)
            applied = await asyncio.wait_for(run, HANG)
        assert [m.version for m in applied] == [LAST.version]
    finally:
        await other.close()


async def test_cli_migrate_up_fails_clearly_behind_a_long_transaction(
    dsn: str, schema: Schema, holder: Any
) -> None:
    """`taskq migrate up` with the default budget exits 1 naming the lock wait and the session."""
    run = await taskq("migrate", "up", "--dsn", dsn, "--schema", schema.name)
    assert run.code == 1, (run.out, run.err)
    assert f"{LAST.up_file} gave up waiting for a table lock after 5s" in run.err
    assert f"pid {holder.get_server_pid()}" in run.err
    assert await applied_versions(dsn, schema) == list(range(1, BEFORE_LAST + 1))


async def test_migrate_up_passes_its_lock_budget_through(
    dsn: str, schema: Schema, holder: Any
) -> None:
    """The composition root's migrate_up (the library call) takes the same budget."""
    with pytest.raises(MigrationError, match=r"gave up waiting for a table lock after 0\.15s"):
        await asyncio.wait_for(
            migrate_up(dsn=dsn, schema_name=schema.name, lock_timeout=timedelta(milliseconds=150)),
            HANG,
        )
    assert await applied_versions(dsn, schema) == list(range(1, BEFORE_LAST + 1))
