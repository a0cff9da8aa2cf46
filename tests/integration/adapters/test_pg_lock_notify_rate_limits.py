"""Postgres rate limiter: exactness across many pool connections, clocks, failures.

The contract suite pins the port; these tests pin what only the Postgres
limiter has: the database clock for ``now=None``, session time zones that
must not change durations, pool failures surfacing as
``RateLimitUnavailable`` (what ``FallbackRateLimiter`` relies on), and the
sweep of ended windows. Every test runs once per driver.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from contracts.provision import NoTestDatabase, migrated_schema, resolve_test_dsn
from psycopg_pool import AsyncConnectionPool

from taskq.adapters.asyncpg.rate_limiter import AsyncpgRateLimiter
from taskq.adapters.postgres.rate_limit import PostgresRateLimiter
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.psycopg.rate_limiter import PsycopgRateLimiter
from taskq.adapters.redis.fallback import FallbackRateLimiter
from taskq.domain.errors import RateLimitUnavailable
from taskq.ports.rate_limiter import RateDecision

pytestmark = pytest.mark.integration

T0 = datetime(2030, 1, 1, tzinfo=UTC)
TICK = timedelta(microseconds=1)
LEASE = timedelta(seconds=10)


@dataclass(frozen=True)
class Pooled:
    """A limiter on a pool of the test's own, and a way to build another on the same pool."""

    limiter: PostgresRateLimiter
    sibling: Callable[[], PostgresRateLimiter]


#: Opens a pool (closed on exit) with a limiter on it; ``timezone`` sets the sessions' zone.
Opener = Callable[..., AbstractAsyncContextManager[Pooled]]


@asynccontextmanager
async def asyncpg_pool(
    dsn: str, schema: Schema, *, size: int = 4, timezone: str | None = None
) -> AsyncIterator[Pooled]:
    settings = {"timezone": timezone} if timezone else None
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=size, server_settings=settings)
    try:
        yield Pooled(
            AsyncpgRateLimiter(pool, schema=schema),
            lambda: AsyncpgRateLimiter(pool, schema=schema),
        )
    finally:
        await pool.close()


@asynccontextmanager
async def psycopg_pool(
    dsn: str, schema: Schema, *, size: int = 4, timezone: str | None = None
) -> AsyncIterator[Pooled]:
    kwargs: dict[str, Any] = {"options": f"-c TimeZone={timezone}"} if timezone else {}
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn, min_size=1, max_size=size, kwargs=kwargs, open=False
    )
    await pool.open()
    try:
        yield Pooled(
            PsycopgRateLimiter(pool, schema=schema),
            lambda: PsycopgRateLimiter(pool, schema=schema),
        )
    finally:
        await pool.close()


OPENERS: dict[str, Opener] = {"asyncpg": asyncpg_pool, "psycopg": psycopg_pool}


@pytest.fixture(scope="module")
def dsn() -> str:
    """The test server's DSN; the module is skipped when there is none."""
    try:
        return resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


@pytest.fixture
async def schema(dsn: str) -> AsyncIterator[Schema]:
    """A fresh migrated schema, dropped after the test."""
    async with migrated_schema(dsn=dsn, prefix="taskq_rl") as provisioned:
        yield Schema(provisioned.schema)


@pytest.fixture(params=sorted(OPENERS))
def open_limiter(request: pytest.FixtureRequest) -> Opener:
    """Each test once per driver."""
    return OPENERS[request.param]


@pytest.fixture
async def limiter(
    open_limiter: Opener, dsn: str, schema: Schema
) -> AsyncIterator[PostgresRateLimiter]:
    """One limiter on a pool of its own."""
    async with open_limiter(dsn, schema) as pooled:
        yield pooled.limiter


async def test_window_is_exact_across_many_pool_connections(
    open_limiter: Opener, dsn: str, schema: Schema
) -> None:
    """Two hundred concurrent acquires over four pools (twenty connections) allow exactly 37."""
    async with AsyncExitStack() as stack:
        limiters = [
            (await stack.enter_async_context(open_limiter(dsn, schema, size=5))).limiter
            for _ in range(4)
        ]
        at = T0 + timedelta(seconds=30.25)
        decisions = await asyncio.gather(
            *(
                limiters[i % 4].acquire_rate("k", limit=37, window=timedelta(minutes=1), now=at)
                for i in range(200)
            )
        )
    assert sum(d.allowed for d in decisions) == 37
    assert {d.retry_after for d in decisions if not d.allowed} == {timedelta(seconds=29.75)}


async def test_reservations_are_exact_under_a_crowd(
    open_limiter: Opener, dsn: str, schema: Schema
) -> None:
    """Sixty-four racers for eight slots over four pools get exactly the eight distinct slots."""
    async with AsyncExitStack() as stack:
        limiters = [
            (await stack.enter_async_context(open_limiter(dsn, schema, size=5))).limiter
            for _ in range(4)
        ]
        results = await asyncio.gather(
            *(
                limiters[i % 4].reserve("k", capacity=8, holder=f"h{i}", lease=LEASE, now=T0)
                for i in range(64)
            )
        )
    held = [r for r in results if r is not None]
    assert sorted(r.slot for r in held) == list(range(8))


async def test_now_none_uses_the_database_clock(limiter: PostgresRateLimiter) -> None:
    """Without ``now`` every call reads the server's clock, so windows and leases still apply."""
    window = timedelta(days=10)  # long enough that the two calls share one window
    assert (await limiter.acquire_rate("k", limit=1, window=window)).allowed
    denied = await limiter.acquire_rate("k", limit=1, window=window)
    assert denied.allowed is False
    assert timedelta(0) < denied.retry_after <= window
    first = await limiter.reserve("k", capacity=1, holder="h", lease=timedelta(hours=1))
    assert first is not None
    assert await limiter.reserve("k", capacity=1, holder="h2", lease=timedelta(hours=1)) is None
    assert await limiter.extend("h", lease=timedelta(hours=1)) == 1
    assert await limiter.sweep_expired() == 0
    await limiter.release(first)
    assert await limiter.reserve("k", capacity=1, holder="h2", lease=timedelta(hours=1))


async def test_durations_ignore_the_session_time_zone(
    open_limiter: Opener, dsn: str, schema: Schema
) -> None:
    """A one-day lease across a DST change lasts 24 hours, and windows stay aligned to UTC."""
    async with open_limiter(dsn, schema, timezone="America/New_York") as pooled:
        limiter = pooled.limiter
        # New York moves its clocks forward on 2030-03-10; a "1 day" interval would be 23h.
        start = datetime(2030, 3, 9, 12, tzinfo=UTC)
        day = timedelta(days=1)
        assert await limiter.reserve("k", capacity=1, holder="h", lease=day, now=start)
        late = start + day - TICK
        assert await limiter.reserve("k", capacity=1, holder="h2", lease=day, now=late) is None
        assert await limiter.reserve("k", capacity=1, holder="h2", lease=day, now=start + day)
        before_midnight = datetime(2030, 3, 9, 23, 59, 59, 500000, tzinfo=UTC)
        assert await limiter.acquire_rate("w", limit=0, window=day, now=before_midnight) == (
            RateDecision(False, timedelta(milliseconds=500))
        )


async def test_sweep_also_drops_ended_windows(
    limiter: PostgresRateLimiter, dsn: str, schema: Schema
) -> None:
    """sweep_expired deletes windows that have ended, counting only expired reservations."""
    assert (await limiter.acquire_rate("k", limit=5, window=timedelta(seconds=1), now=T0)).allowed
    assert await limiter.reserve("k", capacity=1, holder="h", lease=LEASE, now=T0)
    conn = await asyncpg.connect(dsn)
    try:
        count = f"SELECT count(*) FROM {schema.quoted}.rate_limit_windows"
        assert await conn.fetchval(count) == 1
        assert await limiter.sweep_expired(now=T0 + timedelta(seconds=5)) == 0
        assert await conn.fetchval(count) == 0
    finally:
        await conn.close()


async def test_failed_pool_raises_rate_limit_unavailable(
    open_limiter: Opener, dsn: str, schema: Schema
) -> None:
    """Every call on a pool that cannot serve raises RateLimitUnavailable from the driver error."""
    async with open_limiter(dsn, schema) as pooled:
        broken = pooled.limiter  # its pool is closed on exit: every checkout then fails
    calls = [
        broken.acquire_rate("k", limit=1, window=timedelta(seconds=1), now=T0),
        broken.reserve("k", capacity=1, holder="h", lease=LEASE, now=T0),
        broken.extend("h", lease=LEASE, now=T0),
        broken.sweep_expired(now=T0),
    ]
    for call in calls:
        with pytest.raises(RateLimitUnavailable) as raised:
            await call
        assert raised.value.__cause__ is not None


async def test_fallback_answers_when_the_postgres_limiter_fails(
    open_limiter: Opener, dsn: str, schema: Schema, limiter: PostgresRateLimiter
) -> None:
    """RateLimitUnavailable is what lets FallbackRateLimiter hand the call to its fallback."""
    async with open_limiter(dsn, schema) as pooled:
        broken = pooled.limiter  # its pool is closed on exit
    fallback = FallbackRateLimiter(broken, limiter)
    decision = await fallback.acquire_rate("k", limit=1, window=timedelta(seconds=1), now=T0)
    assert decision.allowed
    assert fallback.fallbacks == 1


async def test_closing_the_limiter_leaves_the_pool_open(
    open_limiter: Opener, dsn: str, schema: Schema
) -> None:
    """close() stops the limiter but not the caller's pool, which another limiter still uses."""
    async with open_limiter(dsn, schema) as pooled:
        await pooled.limiter.close()
        with pytest.raises(RateLimitUnavailable, match="closed"):
            await pooled.limiter.acquire_rate("k", limit=1, window=timedelta(seconds=1), now=T0)
        again = await pooled.sibling().acquire_rate(
            "k", limit=1, window=timedelta(seconds=1), now=T0
        )
        assert again.allowed


async def test_bad_arguments_are_refused(limiter: PostgresRateLimiter) -> None:
    """Naive times, non-positive windows or leases raise ValueError; capacity 0 grants nothing."""
    second = timedelta(seconds=1)
    with pytest.raises(ValueError, match="timezone-aware"):
        await limiter.acquire_rate("k", limit=1, window=second, now=datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="window"):
        await limiter.acquire_rate("k", limit=1, window=timedelta(0), now=T0)
    with pytest.raises(ValueError, match="limit"):
        await limiter.acquire_rate("k", limit=-1, window=second, now=T0)
    with pytest.raises(ValueError, match="lease"):
        await limiter.reserve("k", capacity=1, holder="h", lease=timedelta(0), now=T0)
    assert await limiter.reserve("k", capacity=0, holder="h", lease=second, now=T0) is None
