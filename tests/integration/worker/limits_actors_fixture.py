"""Actors with limits, run in real ``taskq worker`` processes by the limit tests.

``gpu_span`` holds the cluster-wide ``gpu`` reservation (capacity 1) and
records when its invocation began and ended in the test schema's
``limit_spans`` table, on the database's clock (one clock for every
process), so a test can check that no two invocations overlapped.
"""

from __future__ import annotations

import asyncio
import os

import asyncpg
from pydantic import BaseModel

from taskq import ConcurrencyLimit, JobContext, actor

LIMIT_SPANS_DDL = """
CREATE TABLE {schema}.limit_spans (
    job_id     bigint      PRIMARY KEY,
    worker_pid integer     NOT NULL,
    began      timestamptz NOT NULL,
    ended      timestamptz
)
"""

#: Real seconds a gpu_span invocation holds its slot: long enough for others to collide.
HOLD_SECONDS = 0.2

_pools: dict[asyncio.AbstractEventLoop, asyncpg.Pool] = {}


class Span(BaseModel):
    n: int


async def _pool() -> asyncpg.Pool:
    # One pool per loop: asyncpg connections belong to the loop that opened them.
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = await asyncpg.create_pool(os.environ["TASKQ_PG_DSN"], min_size=1, max_size=2)
        _pools[loop] = pool
    return pool


@actor(reservations=[ConcurrencyLimit("gpu", capacity=1)])
async def gpu_span(payload: Span, ctx: JobContext[Span]) -> int:
    schema = os.environ["TASKQ_SCHEMA_NAME"]
    pool = await _pool()
    await pool.execute(
        f"INSERT INTO {schema}.limit_spans (job_id, worker_pid, began) "
        "VALUES ($1, $2, clock_timestamp())",
        ctx.job_id,
        os.getpid(),
    )
    await asyncio.sleep(HOLD_SECONDS)
    await pool.execute(
        f"UPDATE {schema}.limit_spans SET ended = clock_timestamp() WHERE job_id = $1",
        ctx.job_id,
    )
    return payload.n


registry = [gpu_span]
