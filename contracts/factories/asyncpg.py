"""Contract-suite factory for the asyncpg adapter.

It runs on the session schema of ``postgres_common`` (migrated once per
process, emptied before each test), which builds the harness both Postgres
drivers share; this module names the asyncpg classes.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Final

from taskq.adapters.asyncpg.driver import Pool
from taskq.adapters.asyncpg.pool import PoolOptions, create_pool
from taskq.adapters.asyncpg.store import AsyncpgQueueStore
from taskq.testing.harness import Harness

from .postgres_common import PortClasses, PostgresDriver, driver_harness

if TYPE_CHECKING:
    from taskq.testing.harness import HarnessFactory


def _ports() -> PortClasses:
    from taskq.adapters.asyncpg.leader_lock import AsyncpgLeaderLock
    from taskq.adapters.asyncpg.notifier import AsyncpgNotifier
    from taskq.adapters.asyncpg.rate_limiter import AsyncpgRateLimiter

    return PortClasses(AsyncpgLeaderLock, AsyncpgNotifier, AsyncpgRateLimiter)


async def _create_pool(dsn: str, max_size: int) -> Pool:
    return await create_pool(dsn, PoolOptions(max_size=max_size))


_ASYNCPG: Final = PostgresDriver("asyncpg", AsyncpgQueueStore, _create_pool, _ports)


def asyncpg_harness() -> AbstractAsyncContextManager[Harness]:
    """The asyncpg adapter on the session schema, emptied for this test."""
    return driver_harness(_ASYNCPG)


if TYPE_CHECKING:
    _factory: HarnessFactory = asyncpg_harness

__all__ = ["asyncpg_harness"]
