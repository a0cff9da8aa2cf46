"""Actors the integration tests run in real ``taskq worker`` processes.

Every actor first records that an attempt started: one row in the test
schema's ``side_effects(job_id, attempt, worker_pid, at)`` table, written on
the actor's own connection (the worker CLI takes no DI providers, so the
actors keep a small asyncpg pool per event loop, read from the same
``TASKQ_PG_DSN`` / ``TASKQ_SCHEMA_NAME`` the worker uses, or from
``SIDE_EFFECTS_DSN`` when a test keeps that pool apart from the worker's
connections). A job that runs twice therefore leaves two rows: that is what
the exactly-once checks count.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from datetime import timedelta
from typing import Any

import asyncpg
from pydantic import BaseModel

from taskq import JobContext, RetryPolicy, actor

SIDE_EFFECTS_DDL = """
CREATE TABLE {schema}.side_effects (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     bigint      NOT NULL,
    attempt    integer     NOT NULL,
    worker_pid integer     NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""

#: How long ``block_first`` blocks its first attempt: far longer than any test waits.
BLOCK_SECONDS = 60.0
#: ``flaky``'s policy: exponential from 200 ms without jitter, so retry n waits 200 ms × 2^(n-1).
FLAKY_RETRY = RetryPolicy(max_attempts=5, base=timedelta(milliseconds=200), jitter=0.0)
#: ``flaky`` raises on attempts before this one.
FLAKY_SUCCEEDS_ON = 3

_pools: dict[asyncio.AbstractEventLoop, asyncpg.Pool] = {}


class Item(BaseModel):
    n: int


class Nap(BaseModel):
    seconds: float
    cooperative: bool = True


#: Where the side-effect rows go when not on the worker's own DSN.
SIDE_EFFECTS_DSN = "SIDE_EFFECTS_DSN"


async def _pool() -> asyncpg.Pool:
    # One pool per loop: asyncpg connections belong to the loop that opened them.
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        dsn = os.environ.get(SIDE_EFFECTS_DSN) or os.environ["TASKQ_PG_DSN"]
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
        _pools[loop] = pool
    return pool


async def record_start(ctx: JobContext[Any]) -> int:
    """Insert this attempt's side-effect row (committed before the actor goes on); how
    many runs of the job came before this one."""
    schema = os.environ["TASKQ_SCHEMA_NAME"]
    pool = await _pool()
    before: int = await pool.fetchval(
        f"INSERT INTO {schema}.side_effects (job_id, attempt, worker_pid) VALUES ($1, $2, $3) "
        f"RETURNING (SELECT count(*) FROM {schema}.side_effects WHERE job_id = $1)",
        ctx.job_id,
        ctx.attempt,
        os.getpid(),
    )
    return before


@actor
async def record(payload: Item, ctx: JobContext[Item]) -> int:
    await record_start(ctx)
    return payload.n


@actor
async def block_first(payload: Item, ctx: JobContext[Item]) -> int:
    # Attempt 1 blocks (until the process is killed); a reclaimed attempt completes.
    await record_start(ctx)
    if ctx.attempt == 1:
        await asyncio.sleep(BLOCK_SECONDS)
    return ctx.attempt


async def _block_first_run(ctx: JobContext[Item]) -> int:
    # The job's first run waits, deaf to its cancel event (a cancelled task still stops
    # it); any later run completes at once, whatever its attempt number.
    if await record_start(ctx) == 0:
        await asyncio.sleep(BLOCK_SECONDS)
    return ctx.attempt


@actor
async def block_first_run(payload: Item, ctx: JobContext[Item]) -> int:
    return await _block_first_run(ctx)


@actor(retry=RetryPolicy(kind="non_retryable"))
async def block_first_run_once(payload: Item, ctx: JobContext[Item]) -> int:
    return await _block_first_run(ctx)


@actor(retry=RetryPolicy(kind="non_retryable"))
async def record_once(payload: Item, ctx: JobContext[Item]) -> int:
    await record_start(ctx)
    return payload.n


@actor(retry=FLAKY_RETRY)
async def flaky(payload: Item, ctx: JobContext[Item]) -> int:
    await record_start(ctx)
    if ctx.attempt < FLAKY_SUCCEEDS_ON:
        raise RuntimeError(f"flaky failure on attempt {ctx.attempt}")
    return ctx.attempt


@actor
async def nap(payload: Nap, ctx: JobContext[Nap]) -> None:
    # A cooperative nap ends early on a cancel request (a shutdown's, for instance).
    await record_start(ctx)
    if not payload.cooperative:
        await asyncio.sleep(payload.seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ctx.cancel_event.wait(), timeout=payload.seconds)


@actor(retry=RetryPolicy(kind="non_retryable"))
async def fail_always(payload: Item, ctx: JobContext[Item]) -> None:
    await record_start(ctx)
    raise ValueError(f"item {payload.n} always fails")


@actor
def hang(payload: Item, ctx: JobContext[Item]) -> None:
    """A sync job that never ends and never looks at its cancel request (a stuck call)."""
    asyncio.run(record_start(ctx))
    threading.Event().wait()


@actor
async def stubborn(payload: Item, ctx: JobContext[Item]) -> None:
    """An async job that swallows every cancellation and never ends."""
    await record_start(ctx)
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            continue


class Reading(BaseModel):
    value: float


@actor
async def nan_result(payload: Item, ctx: JobContext[Item]) -> Reading:
    """Returns a NaN, which no store can keep (JSON has none)."""
    await record_start(ctx)
    return Reading(value=float("nan"))


@actor(retry=RetryPolicy(kind="non_retryable"))
async def undecodable_error(payload: Item, ctx: JobContext[Item]) -> None:
    """Fails with a message holding a lone surrogate, as undecodable bytes give."""
    await record_start(ctx)
    raise OSError(b"cannot open caf\xe9.txt".decode("utf-8", "surrogateescape"))


class Blob(BaseModel):
    parts: list[str]


@actor
async def oversized_result(payload: Item, ctx: JobContext[Item]) -> Blob:
    """Returns about 270 MB of JSON: past jsonb's 255 MB, a limit of the server's only."""
    await record_start(ctx)
    return Blob(parts=["x" * 1_000_000] * 270)


registry = [
    record,
    block_first,
    block_first_run,
    block_first_run_once,
    record_once,
    flaky,
    nap,
    fail_always,
    hang,
    stubborn,
    nan_result,
    undecodable_error,
    oversized_result,
]

#: A one-shot iterable: the worker must refuse it rather than run with no actors.
a_generator = (ref for ref in registry)
