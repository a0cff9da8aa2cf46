"""Cancelling a bulk enqueue on the caller's psycopg connection while its COPY runs.

Before, the cancel cut the COPY off halfway: the caller's next statement failed
with "another command is already in progress" and its transaction was lost. The
COPY now runs to its end (or its own failure) before the cancel goes on; the
savepoint then drops the cancelled jobs and the caller's transaction carries on.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from psycopg_pool import AsyncConnectionPool
from tests.integration.client.client_actors import add
from tests.integration.worker.support import Database

from taskq import JobsClient

pytestmark = pytest.mark.integration

#: Enough rows of enough bytes that the COPY takes a while to send.
BATCH = [{"a": i, "b": 0, "pad": "x" * 2000} for i in range(5000)]


async def _copy_running(watcher: asyncpg.Connection, pid: int) -> None:
    for _ in range(20_000):
        query = await watcher.fetchval(
            "SELECT query FROM pg_stat_activity WHERE pid = $1 AND state = 'active'", pid
        )
        if query is not None and query.startswith("COPY"):
            return
        await asyncio.sleep(0.0005)
    raise AssertionError("the COPY never showed up in pg_stat_activity")


@pytest.mark.parametrize("after", [0, 0.001, 0.002, 0.003, 0.005, 0.008, 0.01, 0.015, 0.02, 0.03])
async def test_a_cancel_during_the_copy_leaves_the_callers_transaction_usable(
    db: Database, after: float
) -> None:
    if db.driver != "psycopg":
        pytest.skip("psycopg only (asyncpg aborts its COPY cleanly)")
    watcher = await asyncpg.connect(db.dsn)
    async with AsyncConnectionPool(db.dsn, min_size=1, max_size=2, open=False) as pool:
        client = JobsClient.from_psycopg_pool(pool, schema=db.schema)
        async with pool.connection() as conn, conn.transaction():
            await conn.execute("CREATE TEMP TABLE app_orders (id int)")
            await conn.execute("INSERT INTO app_orders VALUES (1)")
            task = asyncio.create_task(client.enqueue_many(add, BATCH, connection=conn))
            await _copy_running(watcher, conn.info.backend_pid)
            await asyncio.sleep(after)
            task.cancel()
            try:
                written = len(await task)  # the cancel came after the COPY's end
            except asyncio.CancelledError:
                written = -1  # during the COPY: rolled back; after it: all kept
            await conn.execute("INSERT INTO app_orders VALUES (2)")  # carries on
            cur = await conn.execute("SELECT count(*) FROM app_orders")
            assert await cur.fetchone() == (2,)
        await client.aclose()
    jobs = await watcher.fetchval(f"SELECT count(*) FROM {db.schema}.jobs")
    assert jobs == written if written >= 0 else jobs in (0, len(BATCH))
    await watcher.close()
