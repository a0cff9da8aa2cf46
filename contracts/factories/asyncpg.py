"""Contract-suite factory for the asyncpg adapter.

It runs on the session schema of ``postgres_common`` (migrated once per
process, emptied before each test). The leader lock, notifier and rate
limiter modules are imported only when a test opens one, so the store
contracts run without them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from contracts.factories.postgres_common import NOTIFIER_BACKOFF, POOL_MAX_SIZE, postgres_session
from contracts.harness import Harness
from taskq.adapters.asyncpg.pool import PoolOptions, create_pool
from taskq.adapters.asyncpg.store import AsyncpgQueueStore
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import QueueStore
from taskq.ports.rate_limiter import RateLimiter

if TYPE_CHECKING:
    from contracts.harness import HarnessFactory


@asynccontextmanager
async def asyncpg_harness() -> AsyncIterator[Harness]:
    """The asyncpg adapter on the session schema, emptied for this test."""
    async with postgres_session() as pg:
        dsn, schema, own = pg.dsn, pg.schema, pg.own

        async def open_store() -> QueueStore:
            store = AsyncpgQueueStore(dsn, schema=schema, max_size=POOL_MAX_SIZE)
            own(store)
            return store

        async def open_leader_lock() -> LeaderLock:
            from taskq.adapters.asyncpg.leader_lock import AsyncpgLeaderLock

            lock: LeaderLock = own(AsyncpgLeaderLock(dsn, schema=schema))
            return lock

        async def open_notifier() -> Notifier:
            from taskq.adapters.asyncpg.notifier import AsyncpgNotifier

            notifier: Notifier = own(
                AsyncpgNotifier(dsn, schema=schema, reconnect_backoff_initial=NOTIFIER_BACKOFF)
            )
            return notifier

        async def open_rate_limiter() -> RateLimiter:
            from taskq.adapters.asyncpg.rate_limiter import AsyncpgRateLimiter

            pool = await create_pool(dsn, PoolOptions(max_size=POOL_MAX_SIZE))
            pg.stack.push_async_callback(pool.close)
            limiter: RateLimiter = own(AsyncpgRateLimiter(pool, schema=schema))
            return limiter

        yield await pg.harness(
            "asyncpg",
            open_store=open_store,
            open_leader_lock=open_leader_lock,
            open_notifier=open_notifier,
            open_rate_limiter=open_rate_limiter,
        )


if TYPE_CHECKING:
    _factory: HarnessFactory = asyncpg_harness

__all__ = ["asyncpg_harness"]
