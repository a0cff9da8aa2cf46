"""Contract-suite factory for the psycopg adapter.

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
from taskq.adapters.psycopg.pool import PoolOptions, create_pool
from taskq.adapters.psycopg.store import PsycopgQueueStore
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import QueueStore
from taskq.ports.rate_limiter import RateLimiter

if TYPE_CHECKING:
    from contracts.harness import HarnessFactory


@asynccontextmanager
async def psycopg_harness() -> AsyncIterator[Harness]:
    """The psycopg adapter on the session schema, emptied for this test."""
    async with postgres_session() as pg:
        dsn, schema, own = pg.dsn, pg.schema, pg.own

        async def open_store() -> QueueStore:
            return own(PsycopgQueueStore(dsn, schema=schema, max_size=POOL_MAX_SIZE))

        async def open_leader_lock() -> LeaderLock:
            from taskq.adapters.psycopg.leader_lock import PsycopgLeaderLock

            lock: LeaderLock = own(PsycopgLeaderLock(dsn, schema=schema))
            return lock

        async def open_notifier() -> Notifier:
            from taskq.adapters.psycopg.notifier import PsycopgNotifier

            notifier: Notifier = own(
                PsycopgNotifier(dsn, schema=schema, reconnect_backoff_initial=NOTIFIER_BACKOFF)
            )
            return notifier

        async def open_rate_limiter() -> RateLimiter:
            from taskq.adapters.psycopg.rate_limiter import PsycopgRateLimiter

            pool = own(await create_pool(dsn, PoolOptions(max_size=POOL_MAX_SIZE)))
            limiter: RateLimiter = own(PsycopgRateLimiter(pool, schema=schema))
            return limiter

        yield await pg.harness(
            "psycopg",
            open_store=open_store,
            open_leader_lock=open_leader_lock,
            open_notifier=open_notifier,
            open_rate_limiter=open_rate_limiter,
        )


if TYPE_CHECKING:
    _factory: HarnessFactory = psycopg_harness

__all__ = ["psycopg_harness"]
