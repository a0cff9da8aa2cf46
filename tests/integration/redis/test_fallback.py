"""FallbackRateLimiter: Redis failures are answered by the fallback limiter, or fail closed."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.adapters.redis import FallbackRateLimiter, RedisRateLimiter, make_redis_client
from taskq.domain.errors import RateLimitUnavailable

NOW = datetime(2030, 1, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dead_redis() -> RedisRateLimiter:
    client = make_redis_client(f"redis://127.0.0.1:{_closed_port()}/0")
    return RedisRateLimiter(client, prefix="dead", owns_client=True)


async def test_unreachable_redis_raises_rate_limit_unavailable() -> None:
    """A Redis limiter that cannot connect raises the domain error, not a driver error."""
    limiter = _dead_redis()
    with pytest.raises(RateLimitUnavailable):
        await limiter.acquire_rate("k", limit=1, window=SECOND, now=NOW)
    await limiter.close()


async def test_fallback_answers_while_redis_is_down() -> None:
    """With the fallback enabled, a dead Redis is replaced call by call and limits still hold."""
    fallback = MemoryBackend(clock=FakeClock(NOW)).rate_limiter()
    limiter = FallbackRateLimiter(_dead_redis(), fallback, enabled=True)
    decisions = [await limiter.acquire_rate("k", limit=2, window=SECOND, now=NOW) for _ in range(3)]
    assert [d.allowed for d in decisions] == [True, True, False]
    reservation = await limiter.reserve("r", capacity=1, holder="w", lease=SECOND, now=NOW)
    assert reservation is not None
    assert await limiter.reserve("r", capacity=1, holder="w", lease=SECOND, now=NOW) is None
    await limiter.release(reservation)
    assert limiter.fallbacks == 5  # three acquires and two reserves
    await limiter.close()


async def test_disabled_fallback_fails_closed() -> None:
    """With the fallback disabled the Redis failure propagates (the caller fails closed)."""
    fallback = MemoryBackend(clock=FakeClock(NOW)).rate_limiter()
    limiter = FallbackRateLimiter(_dead_redis(), fallback, enabled=False)
    with pytest.raises(RateLimitUnavailable):
        await limiter.acquire_rate("k", limit=2, window=SECOND, now=NOW)
    assert limiter.fallbacks == 0
    await limiter.close()


async def test_a_permit_is_refunded_to_the_backend_that_granted_it() -> None:
    """A permit the fallback granted goes back to the fallback (the dead Redis is not asked)."""
    fallback = MemoryBackend(clock=FakeClock(NOW)).rate_limiter()
    limiter = FallbackRateLimiter(_dead_redis(), fallback, enabled=True)
    granted = await limiter.acquire_rate("k", limit=1, window=SECOND, now=NOW)
    assert granted.permit is not None
    assert not (await limiter.acquire_rate("k", limit=1, window=SECOND, now=NOW)).allowed
    await limiter.refund_rate(granted.permit)
    assert (await limiter.acquire_rate("k", limit=1, window=SECOND, now=NOW)).allowed
    assert not (await fallback.acquire_rate("k", limit=1, window=SECOND, now=NOW)).allowed
    await limiter.close()


async def test_a_primary_permit_is_refunded_to_the_primary() -> None:
    """A permit live Redis granted goes back to Redis; the fallback's window is untouched."""
    url = os.environ.get("TASKQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    prefix = f"taskq-test:{uuid.uuid4().hex[:12]}"
    primary = RedisRateLimiter(make_redis_client(url), prefix=prefix, owns_client=True)
    fallback = MemoryBackend(clock=FakeClock(NOW)).rate_limiter()
    limiter = FallbackRateLimiter(primary, fallback, enabled=True)
    try:
        assert (await fallback.acquire_rate("k", limit=1, window=SECOND, now=NOW)).allowed
        granted = await limiter.acquire_rate("k", limit=1, window=SECOND, now=NOW)
        assert granted.permit is not None
        await limiter.refund_rate(granted.permit)
        assert (await primary.acquire_rate("k", limit=1, window=SECOND, now=NOW)).allowed
        assert not (await fallback.acquire_rate("k", limit=1, window=SECOND, now=NOW)).allowed
        assert limiter.fallbacks == 0
    finally:
        admin = make_redis_client(url)
        keys = [k async for k in admin.scan_iter(match=f"{prefix}:*")]
        if keys:
            await admin.delete(*keys)
        await admin.aclose()
        await limiter.close()
