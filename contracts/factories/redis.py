"""Contract-suite factory for the Redis rate limiter.

Redis backs only the RateLimiter port, so this harness runs only the
rate-limit contracts (the plugin parametrizes them over it). Its store and
other ports are the memory adapter's, present only because a Harness needs
them. Each harness uses its own key prefix on ``TASKQ_TEST_REDIS_URL`` and
deletes its keys on exit.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from taskq.adapters.redis import RedisRateLimiter, make_redis_client
from taskq.ports.rate_limiter import RateLimiter
from taskq.testing.harness import Harness

from .memory import memory_harness

if TYPE_CHECKING:
    from taskq.testing.harness import HarnessFactory

DEFAULT_URL = "redis://127.0.0.1:6379/15"


@asynccontextmanager
async def redis_harness() -> AsyncIterator[Harness]:
    """Memory ports plus Redis rate limiters sharing one fresh key prefix."""
    url = os.environ.get("TASKQ_TEST_REDIS_URL", DEFAULT_URL)
    prefix = f"taskq-test:{uuid.uuid4().hex[:12]}"
    admin = make_redis_client(url)
    await admin.ping()  # fail loudly here, not inside every test
    try:
        async with memory_harness() as base:

            async def open_rate_limiter() -> RateLimiter:
                return RedisRateLimiter(make_redis_client(url), prefix=prefix, owns_client=True)

            base.name = "redis"
            base.open_rate_limiter = open_rate_limiter
            yield base
    finally:
        keys = [k async for k in admin.scan_iter(match=f"{prefix}:*")]
        if keys:
            await admin.delete(*keys)
        await admin.aclose()


if TYPE_CHECKING:
    _factory: HarnessFactory = redis_harness

__all__ = ["redis_harness"]
