"""A live worker whose ``workers`` row was removed (a stale-workers sweep while the process
was paused) registers again at its next heartbeat instead of running on without a row."""

from __future__ import annotations

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, record
from tests.integration.worker.support import (
    Database,
    WorkerSpawner,
    eventually,
    registered_worker_pids,
)

from taskq import JobsClient

pytestmark = pytest.mark.integration


async def test_a_worker_whose_row_was_removed_registers_again(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """Its row is deleted as cleanup_stale_workers does; the next beat puts it back (logged)."""
    worker = workers.start(db.worker_env())

    async def registered() -> bool:
        return worker.pid in await registered_worker_pids(conn, db.schema)

    await eventually(registered, within=30, what="the worker's row", context=worker.output_tail)
    [worker_id] = await conn.fetch(f"SELECT worker_id FROM {db.schema}.workers")
    await conn.execute(f"DELETE FROM {db.schema}.workers")

    await eventually(registered, within=10, what="the row back", context=worker.output_tail)
    back = await conn.fetchval(f"SELECT worker_id FROM {db.schema}.workers")
    assert back == worker_id["worker_id"]
    [event] = worker.events("worker-reregistered")
    assert event["worker_id"] == back
    handle = await client.enqueue(record, Item(n=7))
    assert await handle.wait(timeout=30) == 7  # still working
    assert worker.returncode is None
