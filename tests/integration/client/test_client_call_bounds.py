"""Every client call ends within TASKQ_CLIENT_CALL_TIMEOUT, saying what it waited for."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest
from tests.integration.client.client_actors import Pair, add
from tests.integration.client.pools import caller_pool
from tests.integration.worker.proxy import FaultyProxy, faulty_proxy
from tests.integration.worker.support import Database

from taskq import (
    IdempotencyKeyLockTimeoutError,
    JobsClient,
    JobStatus,
    PoolWaitTimeout,
    RowLockTimeout,
    ServerAnswerTimeout,
    StoreTimeout,
    StoreUnavailable,
)

pytestmark = pytest.mark.integration

BOUND = 1.0
#: The bound, the cancel grace (0.5 s) and scheduling slack: what "in time" means here.
IN_TIME = BOUND + 1.0
#: What a test waits before calling a hung call a hang.
HANG = 15.0


@asynccontextmanager
async def bounded_client(db: Database, dsn: str | None = None) -> AsyncIterator[JobsClient]:
    """A client on its own pool with a 1 s call bound (TASKQ_CLIENT_CALL_TIMEOUT=1)."""
    settings = db.settings().with_overrides(client_call_timeout=BOUND)
    async with JobsClient.connect(dsn, settings=settings) as client:
        yield client


@asynccontextmanager
async def row_locked(db: Database, job_id: int) -> AsyncIterator[None]:
    """Another session holds the job's row with SELECT ... FOR UPDATE."""
    holder = await asyncpg.connect(db.dsn)
    try:
        async with holder.transaction():
            await holder.execute(f"SELECT 1 FROM {db.schema}.jobs WHERE id = $1 FOR UPDATE", job_id)
            yield
    finally:
        await holder.close()


async def test_cancel_of_a_row_locked_elsewhere_raises_row_lock_timeout_in_time(
    db: Database,
) -> None:
    """JobsClient.cancel (and JobHandle.cancel) of a job whose row another session holds
    FOR UPDATE raises RowLockTimeout naming the job's row after half the bound, changes
    nothing, and works once the lock is gone."""
    async with bounded_client(db) as client:
        handle = await client.enqueue(add, Pair(a=1, b=2))
        async with row_locked(db, handle.job_id):
            for cancel in (client.cancel(handle.job_id), handle.cancel()):
                started = time.monotonic()
                with pytest.raises(RowLockTimeout) as info:
                    async with asyncio.timeout(HANG):
                        await cancel
                took = time.monotonic() - started
                assert took < IN_TIME, took
                assert info.value.waited_for == f"a lock on job {handle.job_id}'s row"
                assert info.value.timeout == BOUND / 2
                assert f"lock on job {handle.job_id}'s row" in str(info.value)
                assert (await client.get(handle.job_id)).status is JobStatus.PENDING  # type: ignore[union-attr]
        assert await client.cancel(handle.job_id) is JobStatus.CANCELLED


async def test_cancel_through_your_own_pool_is_bounded_too(db: Database) -> None:
    """A client on a pool of yours (call_timeout=1) gives up the same way, and leaves the
    pool open and usable."""
    async with caller_pool(db.driver, db.dsn) as app:
        client = app.client(db.schema, call_timeout=BOUND)
        handle = await client.enqueue(add, Pair(a=1, b=2))
        async with row_locked(db, handle.job_id):
            started = time.monotonic()
            with pytest.raises(RowLockTimeout):
                async with asyncio.timeout(HANG):
                    await client.cancel(handle.job_id)
            assert time.monotonic() - started < IN_TIME
        assert await client.cancel(handle.job_id) is JobStatus.CANCELLED
        await client.aclose()
        assert app.is_open()
        assert await app.fetch_count(f"SELECT count(*) FROM {db.schema}.jobs") == 1


async def test_an_enqueue_with_no_lock_budget_of_its_own_waits_half_the_bound(
    db: Database,
) -> None:
    """TASKQ_IDEMPOTENCY_LOCK_TIMEOUT_MS=0 (no budget) no longer waits without bound for
    a key another transaction holds: the typed refusal comes after half the call's bound."""
    settings = db.settings().with_overrides(
        client_call_timeout=BOUND, idempotency_lock_timeout_ms=0
    )
    async with (
        JobsClient.connect(settings=settings) as client,
        caller_pool(db.driver, db.dsn) as app,
        app.transaction() as holder,
    ):
        await client.enqueue(add, Pair(a=1, b=2), idempotency_key="k", connection=holder)
        started = time.monotonic()
        with pytest.raises(IdempotencyKeyLockTimeoutError):
            async with asyncio.timeout(HANG):
                await client.enqueue(add, Pair(a=1, b=2), idempotency_key="k")
        took = time.monotonic() - started
        assert BOUND / 2 - 0.1 < took < IN_TIME, took


@pytest.fixture
async def proxy(db: Database) -> AsyncIterator[FaultyProxy]:
    """A TCP proxy in front of the test Postgres (the server itself is never touched)."""
    async with faulty_proxy(db.dsn) as faulty:
        yield faulty


async def test_a_server_that_stops_answering_ends_the_call_in_time(
    db: Database, proxy: FaultyProxy
) -> None:
    """Postgres silently partitioned away (blackholed connections): a read raises
    ServerAnswerTimeout within the bound instead of waiting for TCP to notice, and the
    next call, which needs a new connection, PoolWaitTimeout saying none could be opened."""
    async with bounded_client(db, proxy.dsn_for(db.dsn)) as client:
        handle = await client.enqueue(add, Pair(a=1, b=2))
        proxy.blackhole()
        calls = [
            (client.get(handle.job_id), ServerAnswerTimeout, "the server's answer"),
            (client.enqueue(add, Pair(a=3, b=4)), PoolWaitTimeout, "a free connection"),
        ]
        for call, error, waited_for in calls:
            started = time.monotonic()
            with pytest.raises(StoreTimeout) as info:
                async with asyncio.timeout(HANG):
                    await call
            assert time.monotonic() - started < IN_TIME
            assert isinstance(info.value, error), info.value
            assert info.value.waited_for.startswith(waited_for)


@pytest.mark.parametrize("driver", ["psycopg"])  # asyncpg's connect fails at once
async def test_a_server_that_refuses_connections_ends_the_call_in_time(
    db: Database, proxy: FaultyProxy
) -> None:
    """Postgres down (connections cut and refused): psycopg's pool keeps reconnecting in
    the background and a read waited its 30 s; now it raises PoolWaitTimeout within the
    bound, saying the pool could not open a connection."""
    async with bounded_client(db, proxy.dsn_for(db.dsn)) as client:
        handle = await client.enqueue(add, Pair(a=1, b=2))
        proxy.refuse()
        for _ in range(2):  # the first may meet a cut connection, the next the refusal
            started = time.monotonic()
            with pytest.raises(StoreUnavailable) as info:
                async with asyncio.timeout(HANG):
                    await client.get(handle.job_id)
            assert time.monotonic() - started < IN_TIME
        assert isinstance(info.value, PoolWaitTimeout), info.value
        assert "could not open a connection" in str(info.value)
