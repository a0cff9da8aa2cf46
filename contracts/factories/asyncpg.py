"""Contract-suite factory for the asyncpg adapter (and the session schema both Postgres
factories share).

One schema is migrated per test process (migrating costs far more than a test)
and dropped when the process exits; each harness empties every table first
(``TRUNCATE ... RESTART IDENTITY``), so each test still starts from nothing.
The leader lock, notifier and rate limiter modules are imported only when a
test opens one, so the store contracts run without them.
"""

from __future__ import annotations

import asyncio
import atexit
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from contracts.harness import Harness
from contracts.provision import (
    create_migrated_schema,
    drop_test_schema,
    fresh_schema_name,
    resolve_test_dsn,
)
from taskq.adapters.asyncpg import migrate
from taskq.adapters.asyncpg.pool import PoolOptions, create_pool
from taskq.adapters.asyncpg.store import AsyncpgQueueStore
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store import POSTGRES_CAPABILITIES
from taskq.adapters.system_clock import SystemClock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import QueueStore
from taskq.ports.rate_limiter import RateLimiter

if TYPE_CHECKING:
    from contracts.harness import HarnessFactory

#: Every table a test may write; schema_migrations stays.
TABLES: Final = (
    "jobs",
    "jobs_archive",
    "job_attempts",
    "workers",
    "maintenance_leader",
    "actor_config",
    "queues",
    "reservation_slots",
    "rate_limit_windows",
)
#: Small pools: a harness opens several stores, each a "process" of its own.
POOL_MAX_SIZE: Final = 5
#: Reconnect quickly after a severed session (the contract allows a few attempts).
NOTIFIER_BACKOFF: Final = 0.1

_schema: Schema | None = None


def _drop_at_exit(dsn: str, name: str) -> None:
    try:
        asyncio.run(drop_test_schema(dsn, name))
    except Exception as exc:  # the process is ending: report, never raise
        print(f"could not drop test schema {name}: {exc!r}")


async def session_schema(dsn: str) -> Schema:
    """The schema this process's Postgres harnesses share, migrated on first use."""
    global _schema
    if _schema is None:
        # Tests run one at a time, so two harnesses never race to create it.
        name = fresh_schema_name("taskq_c")
        await create_migrated_schema(dsn, name)
        atexit.register(_drop_at_exit, dsn, name)
        _schema = Schema(name)
    return _schema


async def empty_tables(conn: migrate.Connection, schema: Schema) -> None:
    """Delete every row a previous test left, and restart the id sequences."""
    tables = ", ".join(f"{schema.quoted}.{table}" for table in TABLES)
    await conn.execute(f"TRUNCATE {tables} RESTART IDENTITY")


async def terminate_backend(conn: migrate.Connection, instance: object) -> None:
    """``sever``: kill the server session behind a leader lock or notifier."""
    pid = getattr(instance, "backend_pid", None)
    if not isinstance(pid, int):
        raise TypeError(f"cannot sever {instance!r}: it has no live backend_pid")
    await conn.execute("SELECT pg_terminate_backend($1)", pid)


class _Closeable(Protocol):
    async def close(self) -> None: ...


_C = TypeVar("_C", bound=_Closeable)


class Owner:
    """Closes what a harness opened when the harness exits."""

    def __init__(self, stack: AsyncExitStack) -> None:
        self._stack = stack

    def __call__(self, thing: _C) -> _C:
        self._stack.push_async_callback(thing.close)
        return thing


@asynccontextmanager
async def asyncpg_harness() -> AsyncIterator[Harness]:
    """The asyncpg adapter on the session schema, emptied for this test."""
    dsn = resolve_test_dsn()
    schema = await session_schema(dsn)
    async with AsyncExitStack() as stack:
        admin = await migrate.connect(dsn)
        stack.push_async_callback(admin.close)
        await empty_tables(admin, schema)
        own = Owner(stack)

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
            stack.push_async_callback(pool.close)
            limiter: RateLimiter = own(AsyncpgRateLimiter(pool, schema=schema))
            return limiter

        async def sever(instance: object) -> None:
            await terminate_backend(admin, instance)

        yield Harness(
            name="asyncpg",
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
    _factory: HarnessFactory = asyncpg_harness

__all__ = ["Owner", "asyncpg_harness", "empty_tables", "session_schema", "terminate_backend"]
