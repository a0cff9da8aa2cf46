"""Enqueue lock budgets on an asyncpg pool whose command_timeout is shorter than they are.

The client-side timer starts first, so an unclamped 200 ms budget on a 0.2 s
command_timeout always lost the race: a bare timeout read as "lost the
Postgres connection" instead of the typed refusal. Budgets are now kept below
half of the pool's command_timeout (asyncpg only: psycopg has no such timer).
"""

from __future__ import annotations

import asyncpg
import pytest
from tests.integration.client.client_actors import Pair, add
from tests.integration.worker.support import Database

from taskq import IdempotencyKeyLockTimeoutError, JobsClient, RowLockTimeout

pytestmark = pytest.mark.integration


@pytest.fixture
def driver() -> str:
    return "asyncpg"


async def test_budget_is_clamped_below_the_pools_command_timeout(db: Database) -> None:
    pool = await asyncpg.create_pool(db.dsn, min_size=1, max_size=2, command_timeout=0.2)
    holder = await asyncpg.connect(db.dsn)
    try:
        client = JobsClient.from_asyncpg_pool(pool, schema=db.schema)
        async with holder.transaction():
            await client.enqueue(add, Pair(a=1, b=2), idempotency_key="k", connection=holder)
            for _ in range(3):
                with pytest.raises(IdempotencyKeyLockTimeoutError):
                    await client.enqueue(add, Pair(a=1, b=2), idempotency_key="k")
        await client.aclose()
    finally:
        await holder.close()
        await pool.close()


async def test_a_row_lock_wait_is_clamped_and_named_too(db: Database) -> None:
    """A cancel that waits on a row lock gives up at half the pool's command_timeout
    (shorter than the client's call bound) with RowLockTimeout, not a bare client timer."""
    pool = await asyncpg.create_pool(db.dsn, min_size=1, max_size=2, command_timeout=0.2)
    holder = await asyncpg.connect(db.dsn)
    try:
        client = JobsClient.from_asyncpg_pool(pool, schema=db.schema)
        handle = await client.enqueue(add, Pair(a=1, b=2))
        async with holder.transaction():
            await holder.execute(
                f"SELECT 1 FROM {db.schema}.jobs WHERE id = $1 FOR UPDATE", handle.job_id
            )
            with pytest.raises(RowLockTimeout, match=r"after 0\.1 s waiting for a lock"):
                await client.cancel(handle.job_id)
        await client.aclose()
    finally:
        await holder.close()
        await pool.close()
