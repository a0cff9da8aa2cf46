"""ActorLimits on the Postgres rate limiter (both drivers): what a worker sees at dispatch.

The same behaviours the unit tests pin on the memory limiter, on real
Postgres shared by two "workers" with pools of their own: denials and
their retry_after, releases, partial-acquire rollback, per-tenant keys,
and a limiter that fails (its pool closed).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from taskq.adapters.asyncpg.rate_limiter import AsyncpgRateLimiter
from taskq.adapters.postgres.rate_limit import PostgresRateLimiter
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.psycopg.rate_limiter import PsycopgRateLimiter
from taskq.app.actors import actor
from taskq.app.worker.events import LOGGER_NAME, RATE_LIMIT_RELEASE_FAILED
from taskq.app.worker.limits import ActorLimits, Admitted, Denied
from taskq.domain.limits import ConcurrencyLimit, RateLimit

pytestmark = pytest.mark.integration

T0 = datetime(2030, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
LEASE = timedelta(seconds=30)


class Call(BaseModel):
    tenant: str = "acme"


@actor(rate_limits=[RateLimit("api", limit=2, per=MINUTE)])
async def rated(payload: Call) -> None: ...


@actor(reservations=[ConcurrencyLimit("a", capacity=1), ConcurrencyLimit("b", capacity=1)])
async def two_slots(payload: Call) -> None: ...


@actor(
    reservations=[ConcurrencyLimit("db", capacity=1)],
    rate_limits=[RateLimit("api", limit=1, per=MINUTE)],
)
async def both(payload: Call) -> None: ...


@actor(
    reservations=[ConcurrencyLimit(lambda p: f"tenant:{p.tenant}", capacity=1)],
    rate_limits=[RateLimit("per-tenant:{tenant}", limit=1, per=MINUTE)],
)
async def per_tenant(payload: Call) -> None: ...


Opener = Callable[[str, Schema], AbstractAsyncContextManager[PostgresRateLimiter]]


@asynccontextmanager
async def asyncpg_limiter(dsn: str, schema: Schema) -> AsyncIterator[PostgresRateLimiter]:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        yield AsyncpgRateLimiter(pool, schema=schema)
    finally:
        await pool.close()


@asynccontextmanager
async def psycopg_limiter(dsn: str, schema: Schema) -> AsyncIterator[PostgresRateLimiter]:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(dsn, min_size=1, max_size=2, open=False)
    await pool.open()
    try:
        yield PsycopgRateLimiter(pool, schema=schema)
    finally:
        await pool.close()


OPENERS: dict[str, Opener] = {"asyncpg": asyncpg_limiter, "psycopg": psycopg_limiter}


@pytest.fixture(params=sorted(OPENERS))
def open_limiter(request: pytest.FixtureRequest) -> Opener:
    """Each test once per driver."""
    return OPENERS[request.param]


@pytest.fixture
async def limiter(open_limiter: Opener, dsn: str, schema: Schema) -> AsyncIterator[Any]:
    async with open_limiter(dsn, schema) as opened:
        yield opened


@pytest.fixture
async def other(open_limiter: Opener, dsn: str, schema: Schema) -> AsyncIterator[Any]:
    """A second worker's limiter on a pool of its own."""
    async with open_limiter(dsn, schema) as opened:
        yield opened


def admitted(result: Admitted | Denied) -> Admitted:
    assert isinstance(result, Admitted), result
    return result


def denied(result: Admitted | Denied) -> Denied:
    assert isinstance(result, Denied), result
    return result


async def slot_is_free(limiter: PostgresRateLimiter, key: str, now: datetime = T0) -> bool:
    probe = await limiter.reserve(key, capacity=1, holder="probe", lease=LEASE, now=now)
    if probe is None:
        return False
    await limiter.release(probe)
    return True


async def test_rate_limit_is_shared_by_workers_and_denied_until_the_window_ends(
    limiter: PostgresRateLimiter, other: PostgresRateLimiter
) -> None:
    """limit=2 per minute over two workers: the third start waits for the window's end."""
    mine = ActorLimits(limiter, holder="w1", lease=LEASE)
    theirs = ActorLimits(other, holder="w2", lease=LEASE)
    at = T0 + timedelta(seconds=20)
    admitted(await mine.acquire(rated, Call(), now=at))
    admitted(await theirs.acquire(rated, Call(), now=at))
    assert denied(await mine.acquire(rated, Call(), now=at)) == Denied(
        timedelta(seconds=40), "rate-limited", "rate:60s:api"
    )
    admitted(await theirs.acquire(rated, Call(), now=T0 + MINUTE))


async def test_reservation_is_held_until_released_across_workers(
    limiter: PostgresRateLimiter, other: PostgresRateLimiter
) -> None:
    """A slot one worker holds denies the other worker's job until it is released."""
    mine = ActorLimits(limiter, holder="w1", lease=LEASE, rng=lambda a, b: 1.0)
    theirs = ActorLimits(other, holder="w2", lease=LEASE, rng=lambda a, b: 1.0)
    held = admitted(await mine.acquire(both, Call(), now=T0))
    assert [(r.key, r.holder) for r in held.reservations] == [("reservation:db", "w1")]
    assert denied(await theirs.acquire(both, Call(), now=T0)) == Denied(
        timedelta(seconds=1), "reservation-unavailable", "reservation:db"
    )
    await mine.release(held)
    # The slot is free again; the rate permit, though, was spent by the first job.
    result = denied(await theirs.acquire(both, Call(), now=T0))
    assert (result.reason, result.key) == ("rate-limited", "rate:60s:api")
    assert await slot_is_free(other, "reservation:db")


async def test_a_partial_acquire_releases_what_it_took(
    limiter: PostgresRateLimiter, other: PostgresRateLimiter
) -> None:
    """'a' free but 'b' held elsewhere: the job is denied and leaves 'a' free."""
    busy = await other.reserve("reservation:b", capacity=1, holder="w2", lease=LEASE, now=T0)
    assert busy is not None
    limits = ActorLimits(limiter, holder="w1", lease=LEASE)
    result = denied(await limits.acquire(two_slots, Call(), now=T0))
    assert (result.reason, result.key) == ("reservation-unavailable", "reservation:b")
    assert await slot_is_free(other, "reservation:a")


async def test_per_tenant_keys_use_the_database_clock_by_default(
    limiter: PostgresRateLimiter,
) -> None:
    """Callable and template keys limit each tenant apart; ``now`` defaults to the server's."""
    limits = ActorLimits(limiter, holder="w1", lease=LEASE)
    acme = admitted(await limits.acquire(per_tenant, Call(tenant="acme")))
    admitted(await limits.acquire(per_tenant, Call(tenant="globex")))
    result = denied(await limits.acquire(per_tenant, Call(tenant="acme")))
    assert (result.reason, result.key) == ("reservation-unavailable", "reservation:tenant:acme")
    await limits.release(acme)
    result = denied(await limits.acquire(per_tenant, Call(tenant="acme")))
    assert result.reason == "rate-limited"
    assert timedelta(0) < result.retry_after <= MINUTE


async def test_a_closed_pool_denies_and_release_fails_quietly(
    open_limiter: Opener, dsn: str, schema: Schema, caplog: pytest.LogCaptureFixture
) -> None:
    """A limiter that cannot reach Postgres denies (snooze); a release then only logs."""
    caplog.set_level("WARNING", logger=LOGGER_NAME)
    async with open_limiter(dsn, schema) as limiter:
        limits = ActorLimits(limiter, holder="w1", lease=LEASE)
        held = admitted(await limits.acquire(both, Call(), now=T0))
    # The pool is closed now.
    result = denied(await limits.acquire(both, Call(), now=T0))
    assert (result.reason, result.key) == ("rate-limiter-unavailable", "reservation:db")
    await limits.release(held)
    failures = [r for r in caplog.records if getattr(r, "event", None) == RATE_LIMIT_RELEASE_FAILED]
    assert len(failures) == 1
    assert not failures[0].exc_info  # a domain error (RateLimitUnavailable), no traceback
