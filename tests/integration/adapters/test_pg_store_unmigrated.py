"""A store on a schema that is missing or behind: SchemaNotMigrated, on both drivers.

The usual operator mistake (a new database, a typo in TASKQ_SCHEMA_NAME, a deploy
before ``taskq migrate up``) must read as that, not as a driver's own
"relation does not exist" error type escaping the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from contracts.provision import create_migrated_schema, drop_test_schema, fresh_schema_name
from tests.integration.adapters.pg_store_support import StoreDriver

from taskq import SchemaNotMigrated
from taskq.adapters.postgres.schema import Schema
from taskq.domain.job import NewJob
from taskq.ports.store_params import ClaimRequest

pytestmark = pytest.mark.integration

LEASE = timedelta(seconds=30)
#: The last migration before 0008 added jobs.finished_by.
BEFORE_FINISHED_BY = 7


@pytest.fixture
async def missing(driver: StoreDriver, dsn: str) -> AsyncIterator[tuple[Any, str]]:
    """A store on a schema that was never created."""
    name = fresh_schema_name("taskq_nomig")
    store = driver.store(dsn, schema=Schema(name), max_size=2)
    try:
        yield store, name
    finally:
        await store.close()


async def test_a_schema_never_migrated_is_named_with_the_fix(missing: tuple[Any, str]) -> None:
    """Enqueue, claim and read each raise SchemaNotMigrated naming the missing table and
    `taskq migrate up`; the store's connections stay usable for the next call."""
    store, name = missing
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.enqueue(NewJob(actor="a")),
        lambda: store.enqueue_many([NewJob(actor="a"), NewJob(actor="b")]),
        lambda: store.claim(
            ClaimRequest(worker_id="w", queues=["default"], actors=["a"], limit=1, lease=LEASE)
        ),
        lambda: store.get(1),
    ]
    for call in calls:
        with pytest.raises(SchemaNotMigrated) as caught:
            await call()
        message = str(caught.value)
        assert f"{name}." in message, message
        assert "does not exist" in message, message
        assert "taskq migrate up" in message, message


async def test_a_schema_behind_this_version_is_named_with_the_fix(
    driver: StoreDriver, dsn: str
) -> None:
    """A schema migrated only up to 0007 lacks jobs.finished_by: a claim (which clears
    it) raises SchemaNotMigrated naming the column."""
    name = fresh_schema_name("taskq_behind")
    await create_migrated_schema(dsn, name, target=BEFORE_FINISHED_BY)
    store = driver.store(dsn, schema=Schema(name), max_size=2)
    try:
        await store.enqueue(NewJob(actor="a"))
        with pytest.raises(SchemaNotMigrated, match="finished_by"):
            await store.claim(
                ClaimRequest(worker_id="w", queues=["default"], actors=["a"], limit=1, lease=LEASE)
            )
    finally:
        await store.close()
        await drop_test_schema(dsn, name)
