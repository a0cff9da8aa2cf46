"""What the asyncpg and psycopg contract factories share: the session schema and the harness.

One schema is migrated per test process (migrating costs far more than a test)
and dropped when the process exits; each harness empties every table first
(``TRUNCATE ... RESTART IDENTITY``), so each test still starts from nothing.
The admin connection that empties it and severs sessions is asyncpg's, which
the migration runner needs anyway.

Each driver's factory module names its adapter classes in a
:class:`PostgresDriver`; :func:`driver_harness` builds the harness from it.
"""

from __future__ import annotations

import asyncio
import atexit
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from taskq.adapters.asyncpg import migrate
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store import POSTGRES_CAPABILITIES
from taskq.adapters.system_clock import SystemClock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import QueueStore
from taskq.ports.rate_limiter import RateLimiter
from taskq.testing.harness import Harness

from ..provision import (
    create_migrated_schema,
    drop_test_schema,
    fresh_schema_name,
    resolve_test_dsn,
)

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


@dataclass(frozen=True, slots=True)
class PostgresSession:
    """One test's Postgres setup: the DSN, the emptied session schema, and what closes."""

    dsn: str
    schema: Schema
    stack: AsyncExitStack
    own: Owner
    admin: migrate.Connection

    async def harness(
        self,
        name: str,
        *,
        open_store: Callable[[], Awaitable[QueueStore]],
        open_leader_lock: Callable[[], Awaitable[LeaderLock]],
        open_notifier: Callable[[], Awaitable[Notifier]],
        open_rate_limiter: Callable[[], Awaitable[RateLimiter]],
    ) -> Harness:
        """The driver's harness on this session; its first store is opened now."""

        async def sever(instance: object) -> None:
            await terminate_backend(self.admin, instance)

        return Harness(
            name=name,
            store=await open_store(),
            open_store=open_store,
            open_leader_lock=open_leader_lock,
            open_notifier=open_notifier,
            sever=sever,
            clock=SystemClock(),
            open_rate_limiter=open_rate_limiter,
            capabilities=POSTGRES_CAPABILITIES,
        )


class _StoreClass(Protocol):
    def __call__(self, dsn: str, /, *, schema: Schema, max_size: int) -> QueueStore: ...


class _LeaderLockClass(Protocol):
    def __call__(self, dsn: str, /, *, schema: Schema) -> LeaderLock: ...


class _NotifierClass(Protocol):
    def __call__(
        self, dsn: str, /, *, schema: Schema, reconnect_backoff_initial: float
    ) -> Notifier: ...


class _RateLimiterClass(Protocol):
    def __call__(self, pool: Any, /, *, schema: Schema) -> RateLimiter: ...


@dataclass(frozen=True, slots=True)
class PortClasses:
    """A driver's leader lock, notifier and rate limiter classes."""

    leader_lock: _LeaderLockClass
    notifier: _NotifierClass
    rate_limiter: _RateLimiterClass


@dataclass(frozen=True, slots=True)
class PostgresDriver:
    """What one driver's harness is built from.

    ``create_pool(dsn, max_size)`` opens a pool for the rate limiter. ``ports``
    imports the other port modules; it runs only when a test opens one of
    those ports, so the store contracts run without them.
    """

    name: str
    store: _StoreClass
    create_pool: Callable[[str, int], Awaitable[_Closeable]]
    ports: Callable[[], PortClasses]


@asynccontextmanager
async def driver_harness(driver: PostgresDriver) -> AsyncIterator[Harness]:
    """The driver's adapters on the session schema, emptied for this test."""
    async with postgres_session() as pg:
        dsn, schema, own = pg.dsn, pg.schema, pg.own

        async def open_store() -> QueueStore:
            return own(driver.store(dsn, schema=schema, max_size=POOL_MAX_SIZE))

        async def open_leader_lock() -> LeaderLock:
            return own(driver.ports().leader_lock(dsn, schema=schema))

        async def open_notifier() -> Notifier:
            notifier = driver.ports().notifier(
                dsn, schema=schema, reconnect_backoff_initial=NOTIFIER_BACKOFF
            )
            return own(notifier)

        async def open_rate_limiter() -> RateLimiter:
            pool = own(await driver.create_pool(dsn, POOL_MAX_SIZE))
            return own(driver.ports().rate_limiter(pool, schema=schema))

        yield await pg.harness(
            driver.name,
            open_store=open_store,
            open_leader_lock=open_leader_lock,
            open_notifier=open_notifier,
            open_rate_limiter=open_rate_limiter,
        )


@asynccontextmanager
async def postgres_session() -> AsyncIterator[PostgresSession]:
    """The session schema, emptied for this test; everything owned is closed on exit."""
    dsn = resolve_test_dsn()
    schema = await session_schema(dsn)
    async with AsyncExitStack() as stack:
        admin = await migrate.connect(dsn)
        stack.push_async_callback(admin.close)
        await empty_tables(admin, schema)
        yield PostgresSession(dsn, schema, stack, Owner(stack), admin)


__all__ = [
    "NOTIFIER_BACKOFF",
    "POOL_MAX_SIZE",
    "TABLES",
    "Owner",
    "PortClasses",
    "PostgresDriver",
    "PostgresSession",
    "driver_harness",
    "empty_tables",
    "postgres_session",
    "session_schema",
    "terminate_backend",
]
