"""The built-in drivers (asyncpg, psycopg): their adapter classes, and the store on either.

asyncpg and psycopg are wired alike: a ``DriverKit`` holds what differs between them.
Each kit's loader imports its driver, so only the driver asked for is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from taskq.adapters.postgres.schema import Schema
from taskq.app.settings import TaskQSettings, WorkerSettings
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.rate_limiter import RateLimiter

if TYPE_CHECKING:
    from taskq.adapters.postgres.store import LockBudgets, PooledQueueStore
    from taskq.adapters.postgres.store.pooled import ClosablePool


P = TypeVar("P", bound="ClosablePool")


class Closeable(Protocol):
    """A port or store built here, closed again when a later step fails."""

    async def close(self) -> None: ...


class _LeaderLockClass(Protocol):
    def __call__(
        self,
        dsn: str,
        /,
        *,
        schema: Schema,
        conn: Any,
        owns_conn: bool,
        connect: Any,
        operation_timeout: float,
        dead_peer_timeout: float | None,
    ) -> LeaderLock: ...


class _NotifierClass(Protocol):
    def __call__(
        self,
        dsn: str,
        /,
        *,
        schema: Schema,
        health_check_interval: float,
        reconnect_backoff_initial: float,
        conn: Any,
        owns_conn: bool,
        connect: Any,
    ) -> Notifier: ...


class _RateLimiterClass(Protocol):
    def __call__(self, pool: Any, /, *, schema: Schema) -> RateLimiter: ...


@dataclass(frozen=True, slots=True)
class DriverKit:
    """One built-in driver's adapter classes and the types its overrides must be.

    The store takes the same arguments on both drivers but its statement-cache
    options: ``store_options`` picks the driver's own from the settings.
    ``pool_label`` names ``pool_type`` in errors.
    """

    store: Callable[..., PooledQueueStore[Any]]
    store_options: Callable[[TaskQSettings], dict[str, int]]
    leader_lock: _LeaderLockClass
    notifier: _NotifierClass
    rate_limiter: _RateLimiterClass
    pool_type: type
    conn_type: type
    pool_label: str


def _asyncpg_kit() -> DriverKit:
    import asyncpg

    from taskq.adapters.asyncpg.leader_lock import AsyncpgLeaderLock
    from taskq.adapters.asyncpg.notifier import AsyncpgNotifier
    from taskq.adapters.asyncpg.rate_limiter import AsyncpgRateLimiter
    from taskq.adapters.asyncpg.store import AsyncpgQueueStore

    return DriverKit(
        store=AsyncpgQueueStore,
        store_options=lambda s: {"max_cached_statement_lifetime": s.max_cached_statement_lifetime},
        leader_lock=AsyncpgLeaderLock,
        notifier=AsyncpgNotifier,
        rate_limiter=AsyncpgRateLimiter,
        pool_type=asyncpg.Pool,
        conn_type=asyncpg.Connection,
        pool_label="an asyncpg.Pool",
    )


def _psycopg_kit() -> DriverKit:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

    from taskq.adapters.psycopg.leader_lock import PsycopgLeaderLock
    from taskq.adapters.psycopg.notifier import PsycopgNotifier
    from taskq.adapters.psycopg.rate_limiter import PsycopgRateLimiter
    from taskq.adapters.psycopg.store import PsycopgQueueStore

    return DriverKit(
        store=PsycopgQueueStore,
        store_options=lambda _: {},
        leader_lock=PsycopgLeaderLock,
        notifier=PsycopgNotifier,
        rate_limiter=PsycopgRateLimiter,
        pool_type=AsyncConnectionPool,
        conn_type=psycopg.AsyncConnection,
        pool_label="a psycopg_pool.AsyncConnectionPool",
    )


#: The built-in drivers by ``TASKQ_DRIVER`` name; a loader imports its driver's adapters.
DRIVER_KITS: Final[dict[str, Callable[[], DriverKit]]] = {
    "asyncpg": _asyncpg_kit,
    "psycopg": _psycopg_kit,
}


def new_store(
    kit: DriverKit,
    settings: TaskQSettings,
    source: Any,
    schema: Schema,
    *,
    max_size: int,
    call_timeout: float | None = None,
) -> PooledQueueStore[Any]:
    """A store on ``source``, a DSN (pool of ``max_size``), pool or pool factory.

    Not opened yet; the pool options apply to a DSN-built pool only.
    ``call_timeout`` bounds each call (a client's store); a worker's store has
    none: the worker bounds its own calls (``TASKQ_HEARTBEAT_COMMAND_TIMEOUT``).
    """
    return kit.store(
        source,
        schema=schema,
        budgets=_lock_budgets(settings),
        statement_cache_size=settings.statement_cache_size,
        pooled=settings.pg_is_pooled,
        max_size=max_size,
        max_inactive_lifetime=(
            settings.pool_max_inactive_lifetime if isinstance(settings, WorkerSettings) else 300.0
        ),
        call_timeout=call_timeout,
        **kit.store_options(settings),
    )


async def open_pool(store: PooledQueueStore[P]) -> P:
    """Open the store's pool now; a store that cannot open it is closed before the error goes on."""
    try:
        return await store.pool()
    except BaseException:
        await store.close()
        raise


def _lock_budgets(settings: TaskQSettings) -> LockBudgets:
    from taskq.adapters.postgres.store import LockBudgets

    return LockBudgets(
        max_pending_ms=settings.max_pending_lock_timeout_ms,
        unique_ms=settings.unique_lock_timeout_ms,
        idempotency_ms=settings.idempotency_lock_timeout_ms,
    )
