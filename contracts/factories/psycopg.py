"""Contract-suite factory for the psycopg adapter.

It shares the asyncpg factory's session schema (migrated once per process,
emptied before each test); the admin connection that empties it and severs
sessions is asyncpg's, which the migration runner needs anyway. The leader
lock, notifier and rate limiter modules are imported only when a test opens
one, so the store contracts run without them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Final

from contracts.factories.asyncpg import Owner, empty_tables, session_schema, terminate_backend
from contracts.harness import Harness
from contracts.provision import resolve_test_dsn
from taskq.adapters.asyncpg import migrate
from taskq.adapters.postgres.store import POSTGRES_CAPABILITIES
from taskq.adapters.psycopg.pool import PoolOptions, create_pool
from taskq.adapters.psycopg.store import PsycopgQueueStore
from taskq.adapters.system_clock import SystemClock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import QueueStore
from taskq.ports.rate_limiter import RateLimiter

if TYPE_CHECKING:
    from contracts.harness import HarnessFactory

#: Small pools: a harness opens several stores, each a "process" of its own.
POOL_MAX_SIZE: Final = 5
#: Reconnect quickly after a severed session (the contract allows a few attempts).
NOTIFIER_BACKOFF: Final = 0.1


@asynccontextmanager
async def psycopg_harness() -> AsyncIterator[Harness]:
    """The psycopg adapter on the session schema, emptied for this test."""
    dsn = resolve_test_dsn()
    schema = await session_schema(dsn)
    async with AsyncExitStack() as stack:
        admin = await migrate.connect(dsn)
        stack.push_async_callback(admin.close)
        await empty_tables(admin, schema)
        own = Owner(stack)

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

        async def sever(instance: object) -> None:
            await terminate_backend(admin, instance)

        yield Harness(
            name="psycopg",
            store=await open_store(),
            open_store=open_store,
            open_leader_lock=open_leader_lock,
            open_notifier=open_notifier,
            sever=sever,
            clock=SystemClock(),
            open_rate_limiter=open_rate_limiter,
            capabilities=POSTGRES_CAPABILITIES,
        )


if TYPE_CHECKING:
    _factory: HarnessFactory = psycopg_harness

__all__ = ["psycopg_harness"]
