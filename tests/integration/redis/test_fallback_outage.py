"""A Redis outage behind the rate-limit fallback: two warnings, not one per call."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
from tests.integration.worker.proxy import FaultyProxy

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.adapters.redis import FallbackRateLimiter, RedisRateLimiter, make_redis_client
from taskq.adapters.redis.fallback import RATE_LIMIT_FALLBACK, RATE_LIMIT_FALLBACK_ENDED

pytestmark = pytest.mark.integration

NOW = datetime(2030, 1, 1, tzinfo=UTC)
WINDOW = timedelta(hours=1)
REDIS_URL = os.environ.get("TASKQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
CALLS = 12


@pytest.fixture
async def proxy() -> AsyncIterator[FaultyProxy]:
    """A TCP proxy in front of the test Redis (the shared Redis itself is never touched)."""
    parts = urlsplit(REDIS_URL)
    faulty = FaultyProxy(parts.hostname or "127.0.0.1", parts.port or 6379)
    await faulty.start()
    try:
        yield faulty
    finally:
        await faulty.close()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.name == "taskq.rate_limit" and r.levelno >= logging.WARNING
    ]


async def test_an_outage_is_warned_once_when_it_starts_and_once_when_it_ends(
    proxy: FaultyProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis refusing connections: the fallback answers every call and one
    rate-limit-fallback warning is logged (not one per call); Redis back: one
    rate-limit-fallback-ended warning counting the calls the fallback answered, then
    nothing more."""
    caplog.set_level(logging.DEBUG, logger="taskq.rate_limit")
    prefix = f"taskq-test:{uuid.uuid4().hex[:12]}"
    client = make_redis_client(proxy.dsn_for(REDIS_URL))
    primary = RedisRateLimiter(client, prefix=prefix, owns_client=True)
    fallback = MemoryBackend(clock=FakeClock(NOW)).rate_limiter()
    limiter = FallbackRateLimiter(primary, fallback, enabled=True)
    try:
        for _ in range(3):
            assert (await limiter.acquire_rate("k", limit=1000, window=WINDOW, now=NOW)).allowed
        assert _warnings(caplog) == []

        proxy.refuse()
        for i in range(CALLS):
            key = f"job-{i}"  # one acquire per job, as a worker does
            assert (await limiter.acquire_rate(key, limit=1, window=WINDOW, now=NOW)).allowed
        await limiter.extend("worker", lease=WINDOW, now=NOW)  # the heartbeat's call
        assert limiter.fallbacks == CALLS
        [started] = _warnings(caplog)
        assert started.getMessage() == RATE_LIMIT_FALLBACK
        assert started.__dict__["operation"] == "acquire_rate"
        assert started.__dict__["error"]

        await proxy.restore()
        for _ in range(3):
            assert (await limiter.acquire_rate("k", limit=1000, window=WINDOW, now=NOW)).allowed
        assert limiter.fallbacks == CALLS
        assert [r.getMessage() for r in _warnings(caplog)] == [
            RATE_LIMIT_FALLBACK,
            RATE_LIMIT_FALLBACK_ENDED,
        ]
        ended = _warnings(caplog)[1]
        assert ended.__dict__["fallback_calls"] == CALLS
    finally:
        await proxy.restore()
        admin = make_redis_client(REDIS_URL)
        keys = [k async for k in admin.scan_iter(match=f"{prefix}:*")]
        if keys:
            await admin.delete(*keys)
        await admin.aclose()
        await limiter.close()
