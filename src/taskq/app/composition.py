"""The composition root: the one app module that names concrete adapters.

Everything else in ``taskq.app`` talks to ports, or to the functions here.
Nothing happens at import time.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar, cast

from taskq.adapters.asyncpg import migrate as asyncpg_migrate
from taskq.adapters.postgres.migrator import (
    Migration,
    MigrationState,
    MigrationStatus,
    check_known_version,
    check_schema_current,
    discover_migrations,
    migration_status,
    status_problems,
)
from taskq.adapters.postgres.schema import DEFAULT_SCHEMA_NAME, Schema
from taskq.app.connection_overrides import (  # re-exported: callers look the event up here
    WORKER_CONNECTIONS_POOL_ROLES as WORKER_CONNECTIONS_POOL_ROLES,
)
from taskq.app.connection_overrides import check_overrides, dedicated_conn, store_source
from taskq.app.connections import WorkerConnections
from taskq.app.observability.metrics import new_metrics_registry
from taskq.app.port_check import check_given_ports, check_port, check_worker_ports
from taskq.app.settings import (
    BUILTIN_DRIVERS,
    DEFAULT_CLIENT_CALL_TIMEOUT,
    TaskQSettings,
    WorkerSettings,
    redact_url,
    require_pg_dsn,
)
from taskq.app.worker.ports import WorkerPorts
from taskq.domain.errors import (
    ConfigurationError,
    RateLimitUnavailable,
    TaskQError,
)
from taskq.ports.clock import Clock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import QueueStore, WorkerStore
from taskq.ports.rate_limiter import RateLimiter

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from taskq.adapters.postgres.embedded import EmbeddedPostgres
    from taskq.adapters.postgres.store import LockBudgets, PooledQueueStore
    from taskq.adapters.postgres.store.pooled import ClosablePool

P = TypeVar("P", bound="ClosablePool")


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What ``taskq migrate status`` shows: every migration's state, and any problem.

    ``problems`` is empty when the applied history matches the files;
    otherwise it is the message ``up``/``down`` would refuse with.
    """

    schema: str
    rows: tuple[MigrationStatus, ...]
    problems: str


def describe_target(dsn: str, schema: str) -> str:
    """``schema X in database D at host:port``: what ``taskq migrate`` works on, no password."""
    from taskq.adapters.postgres.dsn import dsn_database, dsn_location

    database = dsn_database(dsn) or "(the user's default database)"
    return f"schema {schema} in database {database} at {dsn_location(dsn)}"


async def migrate_up(
    *,
    dsn: str,
    schema_name: str = DEFAULT_SCHEMA_NAME,
    target: int | None = None,
    lock_timeout: timedelta = asyncpg_migrate.MIGRATION_LOCK_TIMEOUT,
) -> tuple[Migration, ...]:
    """Apply pending migrations (up to ``target``); returns those applied.

    Each migration gives up (rolled back, ``MigrationError`` naming the lock
    holders) after waiting ``lock_timeout`` for a table lock; zero waits as
    long as it takes. The schema name is validated before any connection is
    made. Raises ``InvalidIdentifierError``, ``StoreUnavailable`` or ``MigrationError``.
    """
    schema = Schema(schema_name)
    if target is not None:  # before connecting: a typo must not create the schema
        check_known_version(discover_migrations(), target, "target")
    async with asyncpg_migrate.open_connection(require_pg_dsn(dsn)) as conn:
        return await asyncpg_migrate.upgrade(conn, schema, target=target, lock_timeout=lock_timeout)


async def migrate_down(
    *,
    dsn: str,
    schema_name: str = DEFAULT_SCHEMA_NAME,
    to: int | None = None,
    lock_timeout: timedelta = asyncpg_migrate.MIGRATION_LOCK_TIMEOUT,
) -> tuple[Migration, ...]:
    """Revert migrations newer than ``to`` (default: the latest one); returns those reverted."""
    schema = Schema(schema_name)
    if to:
        check_known_version(discover_migrations(), to, "--to")
    async with asyncpg_migrate.open_connection(require_pg_dsn(dsn)) as conn:
        return await asyncpg_migrate.downgrade(conn, schema, to=to, lock_timeout=lock_timeout)


async def migrate_status(*, dsn: str, schema_name: str = DEFAULT_SCHEMA_NAME) -> MigrationReport:
    """Applied and pending migrations of the schema; creates nothing."""
    schema = Schema(schema_name)
    available = discover_migrations()
    async with asyncpg_migrate.open_connection(require_pg_dsn(dsn)) as conn:
        applied = await asyncpg_migrate.read_applied(conn, schema)
    return MigrationReport(
        schema.name, migration_status(available, applied), status_problems(available, applied)
    )


# -- worker ports ----------------------------------------------------------------------
#
# Adapters are imported inside the functions below: building a worker on the
# memory adapter must not import a database driver, and a driver whose extra
# is missing fails only the worker that asked for it.


async def build_worker_ports(
    settings: WorkerSettings,
    *,
    store: WorkerStore | None = None,
    leader_lock: LeaderLock | None = None,
    notifier: Notifier | None = None,
    rate_limiter: RateLimiter | None = None,
    clock: Clock | None = None,
    connections: WorkerConnections | None = None,
) -> WorkerPorts:
    """The ports a worker runs on: what the caller passed, the rest built from settings.

    Passed ports are caller-owned (never closed by TaskQ); built ones are
    listed in ``WorkerPorts.owned`` and closed when the worker exits.
    ``TASKQ_DRIVER`` decides how missing ports are built:

    - ``asyncpg`` / ``psycopg``: the Postgres adapters on ``TASKQ_PG_DSN_DIRECT``
      and the worker's schema (a built store's pool is opened at once, and the
      rate limiter shares it);
    - ``package.module:factory``: ``factory(settings)`` returns (or awaits to) a
      complete ``WorkerPorts``; its ports are TaskQ-owned, and any the caller
      also passed are closed unused. ``taskq.app.composition:memory_worker_ports``
      is such a factory (an in-process memory backend, for demos and smoke tests).

    ``connections`` replaces the resources the built-in drivers build from
    DSNs (see :mod:`taskq.app.connections`): given objects stay the caller's,
    factory products are closed with the port that uses them. The store runs
    on the first given pool role (dispatcher, heartbeat, worker); a Redis
    client (or ``TASKQ_REDIS_URL``) puts the rate limiter on Redis, with the
    Postgres one as fallback when the store is built here.

    Raises ``ConfigurationError`` when a port cannot be built (including an
    override of the wrong driver, or overrides with a custom ``TASKQ_DRIVER``)
    and ``StoreUnavailable`` when a built store cannot reach its database.
    Every port is checked for its protocol's methods (``ConfigurationError``
    naming the port and what it lacks) before the worker registers.
    """
    check_given_ports(
        store=store,
        leader_lock=leader_lock,
        notifier=notifier,
        rate_limiter=rate_limiter,
        clock=clock,
    )
    ports = await _build_worker_ports(
        settings,
        store=store,
        leader_lock=leader_lock,
        notifier=notifier,
        rate_limiter=rate_limiter,
        clock=clock,
        connections=connections,
    )
    try:
        check_worker_ports(ports)
    except ConfigurationError:
        await ports.close_owned()
        raise
    return ports


async def _build_worker_ports(
    settings: WorkerSettings,
    *,
    store: WorkerStore | None,
    leader_lock: LeaderLock | None,
    notifier: Notifier | None,
    rate_limiter: RateLimiter | None,
    clock: Clock | None,
    connections: WorkerConnections | None,
) -> WorkerPorts:
    given_clock, builtin = clock, settings.driver in BUILTIN_DRIVERS
    clock = clock if clock is not None else _system_clock()
    if settings.redis_url is not None and rate_limiter is None and not builtin:
        _warn_ignored_redis(settings.driver)
    wants_notifier = settings.notify_enabled and notifier is None
    overrides = connections is not None and connections.has_any()
    wants_redis = rate_limiter is None and (
        settings.redis_url is not None
        or (
            connections is not None
            and (
                connections.redis_client is not None or connections.redis_client_factory is not None
            )
        )
    )
    if (
        store is not None
        and leader_lock is not None
        and not wants_notifier
        and not (wants_redis and settings.driver in BUILTIN_DRIVERS)
    ):
        return WorkerPorts(
            store=store,
            leader_lock=leader_lock,
            notifier=notifier,
            rate_limiter=rate_limiter,
            clock=clock,
        )
    if settings.driver in BUILTIN_DRIVERS:
        return await _postgres_worker_ports(
            settings,
            store=store,
            leader_lock=leader_lock,
            notifier=notifier,
            rate_limiter=rate_limiter,
            clock=clock,
            connections=connections or WorkerConnections(),
        )
    if overrides:
        raise ConfigurationError(
            f"TASKQ_DRIVER={settings.driver}: WorkerConnections apply to the asyncpg and "
            "psycopg drivers only; a custom factory builds its own connections"
        )
    built = await _factory_worker_ports(settings)
    owned: set[str] = set()
    if store is None:
        store, owned = built.store, owned | {"store"}
    else:
        await _close_unused(built.store, store)
    if leader_lock is None:
        leader_lock, owned = built.leader_lock, owned | {"leader_lock"}
    else:
        await _close_unused(built.leader_lock, leader_lock)
    if notifier is None:
        notifier = built.notifier
        owned |= {"notifier"} if notifier is not None else set()
    else:
        await _close_unused(built.notifier, notifier)
    if rate_limiter is None:
        rate_limiter = built.rate_limiter
        owned |= {"rate_limiter"} if rate_limiter is not None else set()
    else:
        await _close_unused(built.rate_limiter, rate_limiter)
    return WorkerPorts(
        store=store,
        leader_lock=leader_lock,
        notifier=notifier,
        rate_limiter=rate_limiter,
        # The factory's clock (say, its database's) unless the caller passed one.
        clock=given_clock if given_clock is not None else built.clock,
        owned=frozenset(owned),
    )


def _warn_ignored_redis(driver: str) -> None:
    import logging

    from taskq.app.worker import events

    events.emit(
        events.WORKER_SETTINGS_IGNORED,
        logging.WARNING,
        settings=["TASKQ_REDIS_URL"],
        note=f"TASKQ_DRIVER={driver} names a factory: its ports (and its rate limiter, "
        "or none) are used, not a Redis one",
    )


async def _close_unused(built: _Closeable | None, passed: object) -> None:
    """Close a factory-built port the caller replaced with its own."""
    if built is not None and built is not passed:
        await built.close()


def worker_metrics_registry() -> CollectorRegistry:
    """The Prometheus registry of one worker process: its metrics are registered on it,
    and the health server's ``/metrics`` renders it (the same object for both)."""
    return new_metrics_registry()


def memory_worker_ports(settings: WorkerSettings) -> WorkerPorts:
    """Worker ports on a fresh in-process memory backend on the real clock.

    Usable as ``TASKQ_DRIVER=taskq.app.composition:memory_worker_ports``. Only
    this process sees the jobs, so it suits demos and smoke tests; application
    tests build a ``MemoryBackend(clock=FakeClock())`` and pass its ports.
    """
    from taskq.adapters.memory import MemoryBackend

    backend = MemoryBackend(clock=_system_clock())
    return WorkerPorts(
        store=backend.store(),
        leader_lock=backend.leader_lock(),
        notifier=backend.notifier() if settings.notify_enabled else None,
        rate_limiter=backend.rate_limiter(),
        clock=backend.clock,
    )


class _Closeable(Protocol):
    async def close(self) -> None: ...


def _system_clock() -> Clock:
    from taskq.adapters.system_clock import SystemClock

    return SystemClock()


# asyncpg and psycopg are wired alike: a _DriverKit holds what differs between them.


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
class _DriverKit:
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


def _asyncpg_kit() -> _DriverKit:
    import asyncpg

    from taskq.adapters.asyncpg.leader_lock import AsyncpgLeaderLock
    from taskq.adapters.asyncpg.notifier import AsyncpgNotifier
    from taskq.adapters.asyncpg.rate_limiter import AsyncpgRateLimiter
    from taskq.adapters.asyncpg.store import AsyncpgQueueStore

    return _DriverKit(
        store=AsyncpgQueueStore,
        store_options=lambda s: {"max_cached_statement_lifetime": s.max_cached_statement_lifetime},
        leader_lock=AsyncpgLeaderLock,
        notifier=AsyncpgNotifier,
        rate_limiter=AsyncpgRateLimiter,
        pool_type=asyncpg.Pool,
        conn_type=asyncpg.Connection,
        pool_label="an asyncpg.Pool",
    )


def _psycopg_kit() -> _DriverKit:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

    from taskq.adapters.psycopg.leader_lock import PsycopgLeaderLock
    from taskq.adapters.psycopg.notifier import PsycopgNotifier
    from taskq.adapters.psycopg.rate_limiter import PsycopgRateLimiter
    from taskq.adapters.psycopg.store import PsycopgQueueStore

    return _DriverKit(
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
_DRIVER_KITS: Final[dict[str, Callable[[], _DriverKit]]] = {
    "asyncpg": _asyncpg_kit,
    "psycopg": _psycopg_kit,
}


def _new_store(
    kit: _DriverKit,
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


async def _open_pool(store: PooledQueueStore[P]) -> P:
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


def _worker_pool_max(settings: WorkerSettings) -> int:
    # One pool serves what the guide splits into dispatcher, heartbeat and worker pools.
    return settings.dispatcher_pool_size + settings.heartbeat_pool_size + settings.worker_pool_size


async def _postgres_worker_ports(
    settings: WorkerSettings,
    *,
    store: WorkerStore | None,
    leader_lock: LeaderLock | None,
    notifier: Notifier | None,
    rate_limiter: RateLimiter | None,
    clock: Clock,
    connections: WorkerConnections,
) -> WorkerPorts:
    """The missing ports on Postgres. Everything uses the direct DSN: the store
    claims and heartbeats (the guide keeps those off transaction-mode poolers),
    the leader lock and LISTEN need a session. The store's pool is opened here,
    so an unreachable server fails the start at once (``StoreUnavailable``).

    ``connections`` overrides are checked against the driver before anything
    is opened; if building a later port fails, the ones built so far are closed.
    """
    schema = Schema(settings.schema_name)
    dsn = settings.pg_dsn_direct  # required by each port that connects from it
    kit = _DRIVER_KITS[settings.driver]()
    check_overrides(
        connections, pool_type=kit.pool_type, conn_type=kit.conn_type, driver=settings.driver
    )
    _refuse_pooled_direct(settings, connections, store, leader_lock, notifier)
    owned: set[str] = set()
    built: list[_Closeable] = []
    on_dsn: list[str] = []  # the ports that open their own connection from the DSN
    try:
        pg_limiter: RateLimiter | None = None
        if store is None:
            source = store_source(connections, kit.pool_type, settings.driver)
            pg_store = _new_store(
                kit,
                settings,
                require_pg_dsn(dsn) if source is None else source,
                schema,
                max_size=_worker_pool_max(settings),
            )
            pool = await _open_pool(pg_store)
            built.append(pg_store)
            await _check_schema(pg_store)
            store, pg_limiter = pg_store, kit.rate_limiter(pool, schema=schema)
            owned.add("store")
        if leader_lock is None:
            conn, owns, connect = await dedicated_conn(
                connections, "leader_conn", kit.conn_type, settings.driver
            )
            if conn is None:
                require_pg_dsn(dsn)
            leader_lock = kit.leader_lock(
                dsn,
                schema=schema,
                conn=conn,
                owns_conn=owns,
                connect=connect,
                # An election or probe is a beat's peer: bounded alike, so a partition is
                # a lost lock within that long, never a hang of the leader loop.
                operation_timeout=settings.heartbeat_command_timeout,
                # The server frees a silently cut-off leader's lock within about a lease,
                # so another worker can lead and reclaim that leader's jobs.
                dead_peer_timeout=settings.lock_lease,
            )
            owned.add("leader_lock")
            built.append(leader_lock)
            on_dsn += ["leader_lock"] if conn is None else []
        if notifier is None and settings.notify_enabled:
            conn, owns, connect = await dedicated_conn(
                connections, "notify_conn", kit.conn_type, settings.driver
            )
            if conn is None:
                require_pg_dsn(dsn)
            notifier = kit.notifier(
                dsn,
                schema=schema,
                health_check_interval=settings.notify_health_check_interval,
                reconnect_backoff_initial=settings.notify_reconnect_backoff_initial,
                conn=conn,
                owns_conn=owns,
                connect=connect,
            )
            owned.add("notifier")
            built.append(notifier)
            on_dsn += ["notifier"] if conn is None else []
        if on_dsn and "store" not in owned:
            # Nothing has connected yet: an unreachable DSN would only show as a leader
            # that is never elected (promotions and lease sweeps never run).
            await _probe_dsn(settings, on_dsn)
        if rate_limiter is None:
            # The Postgres limiter shares the store's pool; the worker only extends and
            # sweeps reservations.
            rate_limiter = await _redis_rate_limiter(settings, schema, connections, pg_limiter)
            if rate_limiter is not None:
                owned.add("rate_limiter")
    except BaseException:
        for port in reversed(built):
            with contextlib.suppress(Exception):
                await port.close()
        raise
    return WorkerPorts(
        store=store,
        leader_lock=leader_lock,
        notifier=notifier,
        rate_limiter=rate_limiter,
        clock=clock,
        owned=frozenset(owned),
    )


def _refuse_pooled_direct(
    settings: WorkerSettings,
    connections: WorkerConnections,
    store: WorkerStore | None,
    leader_lock: LeaderLock | None,
    notifier: Notifier | None,
) -> None:
    """Refuse to run session-bound work through a transaction-mode pooler.

    Under ``TASKQ_PG_IS_POOLED`` a direct DSN that is just ``TASKQ_PG_DSN`` is
    the pooler: a session advisory lock taken there is not held (two leaders)
    and a LISTEN hears nothing. Roles given as objects or factories don't count.
    """
    if not settings.pg_is_pooled or settings.pg_dsn_direct != settings.pg_dsn:
        return

    def on_dsn(role: str) -> bool:
        return all(getattr(connections, name) is None for name in (role, f"{role}_factory"))

    roles = []
    if store is None and all(
        on_dsn(role) for role in ("dispatcher_pool", "heartbeat_pool", "worker_pool")
    ):
        roles.append("the store's pool (claims, heartbeats)")
    if leader_lock is None and on_dsn("leader_conn"):
        roles.append("the leader lock")
    if notifier is None and settings.notify_enabled and on_dsn("notify_conn"):
        roles.append("LISTEN")
    if roles:
        raise ConfigurationError(
            f"TASKQ_PG_IS_POOLED=true but TASKQ_PG_DSN_DIRECT is not set (or equals "
            f"TASKQ_PG_DSN), so {', '.join(roles)} would run through the pooler; set "
            "TASKQ_PG_DSN_DIRECT to a direct (non-pooled) Postgres DSN"
        )


async def _probe_dsn(settings: WorkerSettings, roles: list[str]) -> None:
    """Connect once to the direct DSN, for ``roles`` built on it; refuse the start if it fails."""
    try:
        conn = await asyncpg_migrate.connect(settings.pg_dsn_direct)
    except TaskQError as exc:
        given = " and ".join(f"{role}=" for role in roles)
        were, them = ("was", "it") if len(roles) == 1 else ("were", "them")
        raise type(exc)(
            f"no {given} {were} given, so TaskQ builds {them} on Postgres "
            f"(TASKQ_DRIVER={settings.driver}, TASKQ_PG_DSN_DIRECT), which fails: {exc}; "
            f"pass {given} to the worker, or fix TASKQ_PG_DSN_DIRECT"
        ) from exc
    await conn.close()


async def _check_schema(store: PooledQueueStore[Any]) -> None:
    """Refuse a schema behind this TaskQ's migrations (``SchemaNotMigrated``); warn if ahead.

    Without this, a worker on an older schema would start and fail every claim.
    """
    import logging

    from taskq.app.worker import events

    applied = await store.applied_migration_versions()
    ahead = check_schema_current(discover_migrations(), applied, schema=store.schema.name)
    if ahead is not None:
        events.emit(events.WORKER_SCHEMA_AHEAD, logging.WARNING, note=ahead)


async def _redis_rate_limiter(
    settings: WorkerSettings,
    schema: Schema,
    connections: WorkerConnections,
    pg_limiter: RateLimiter | None,
) -> RateLimiter | None:
    """The rate limiter on Redis when a client is given, made or configured, else ``pg_limiter``.

    With a Postgres limiter to fall back on, Redis is wrapped in
    ``FallbackRateLimiter`` (``TASKQ_RATE_LIMIT_PG_FALLBACK_ENABLED``).
    """
    if connections.redis_client is not None:
        client, owns = connections.redis_client, False
        _require_redis(client, "redis_client", "is")
    elif connections.redis_client_factory is not None:
        try:
            client, owns = await connections.redis_client_factory(), True
        except TaskQError:
            raise
        except Exception as exc:
            raise RateLimitUnavailable(
                f"WorkerConnections.redis_client_factory failed: {type(exc).__name__}: {exc}"
            ) from exc
        _require_redis(client, "redis_client_factory", "returned")
    elif settings.redis_url is not None:
        from taskq.adapters.redis import make_redis_client

        client, owns = make_redis_client(settings.redis_url), True
    else:
        return pg_limiter
    from taskq.adapters.redis import FallbackRateLimiter, RedisRateLimiter

    redis_limiter = RedisRateLimiter(client, prefix=f"taskq:{schema.name}", owns_client=owns)
    if pg_limiter is None:
        return redis_limiter
    return FallbackRateLimiter(
        redis_limiter, pg_limiter, enabled=settings.rate_limit_pg_fallback_enabled
    )


def _require_redis(client: object, field: str, verb: str) -> None:
    """Refuse what is not a redis.asyncio client before the limiter uses it (a URL, None)."""
    if not callable(getattr(client, "register_script", None)):
        raise ConfigurationError(
            f"WorkerConnections.{field} {verb} {client!r:.80} ({type(client).__name__}); "
            "it must be a redis.asyncio.Redis client (to use a URL, set TASKQ_REDIS_URL)"
        )


def _described(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    return redact_url(f"{type(exc).__name__}: {exc}")  # an echoed DSN keeps no password


async def _factory_worker_ports(settings: WorkerSettings) -> WorkerPorts:
    spec = settings.driver
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"TASKQ_DRIVER={spec}: cannot load the factory: {exc}") from exc
    except (Exception, SystemExit) as exc:  # the module failed on import (SyntaxError too)
        raise ConfigurationError(
            f"TASKQ_DRIVER={spec}: importing {module_name} failed: {_described(exc)}"
        ) from exc
    if not callable(factory):
        raise ConfigurationError(f"TASKQ_DRIVER={spec}: {attr} is not callable")
    try:
        product = factory(settings)
        if inspect.isawaitable(product):
            product = await product
    except TaskQError:
        raise
    except (Exception, SystemExit) as exc:  # wrong signature, or the factory raised
        raise ConfigurationError(
            f"TASKQ_DRIVER={spec}: the factory failed: {_described(exc)}"
        ) from exc
    if not isinstance(product, WorkerPorts):
        raise ConfigurationError(
            f"TASKQ_DRIVER={spec}: the factory returned {type(product).__name__}, "
            "not taskq.app.worker.ports.WorkerPorts"
        )
    return product


__all__ = [
    "Migration",
    "MigrationReport",
    "MigrationState",
    "MigrationStatus",
    "WorkerPorts",
    "build_worker_ports",
    "describe_target",
    "memory_worker_ports",
    "migrate_down",
    "migrate_status",
    "migrate_up",
    "operator_store",
]


async def open_store(settings: TaskQSettings) -> QueueStore:
    """A client store on its own new pool (``TASKQ_DRIVER``, DSN, schema from ``settings``).

    The pool is opened now, so an unreachable database fails here with
    ``StoreUnavailable``; ``store.close()`` closes the pool.
    """
    schema = Schema(settings.schema_name)
    load_kit = _DRIVER_KITS.get(settings.driver)
    if load_kit is None:
        raise ConfigurationError(
            f"TASKQ_DRIVER={settings.driver!r} names a custom adapter factory, which builds "
            "worker ports; build the client from its store with JobsClient(store)"
        )
    store = _new_store(
        load_kit(),
        settings,
        require_pg_dsn(settings.pg_dsn),
        schema,
        max_size=settings.client_pool_size,
        call_timeout=settings.client_call_timeout,
    )
    await _open_pool(store)
    return store


def store_from_pool(
    pool: object, *, driver: str, schema: str, call_timeout: float = DEFAULT_CLIENT_CALL_TIMEOUT
) -> QueueStore:
    """A client store on a caller-owned pool (asyncpg.Pool or psycopg AsyncConnectionPool).

    TaskQ never closes the pool: ``store.close()`` leaves it open. Each call
    ends within ``call_timeout`` seconds; the pool's own settings are not touched.
    """
    validated = Schema(schema)
    load_kit = _DRIVER_KITS.get(driver)
    if load_kit is None:
        raise ConfigurationError(f"unknown driver {driver!r}: expected 'asyncpg' or 'psycopg'")
    kit = load_kit()
    if not isinstance(pool, kit.pool_type):
        raise ConfigurationError(f"expected {kit.pool_label}, got {type(pool).__name__}")
    return kit.store(pool, schema=validated, call_timeout=call_timeout)


# -- operator commands -----------------------------------------------------------------


@contextlib.asynccontextmanager
async def operator_store(settings: WorkerSettings) -> AsyncIterator[QueueStore]:
    """The store ``taskq jobs|queues|workers|actor-config`` work on, closed on exit.

    Built as the worker's would be: on ``TASKQ_DRIVER`` asyncpg/psycopg a small
    pool on the direct DSN and the worker's schema (each call bounded by
    ``TASKQ_CLIENT_CALL_TIMEOUT``); on a ``module:factory`` driver the factory's
    store (its other ports are closed unused), checked for every store method.
    Raises ``ConfigurationError`` or ``StoreUnavailable`` as the worker would.
    """
    if settings.driver in BUILTIN_DRIVERS:
        pg_store = _new_store(
            _DRIVER_KITS[settings.driver](),
            settings,
            require_pg_dsn(settings.pg_dsn_direct),
            Schema(settings.schema_name),
            max_size=2,
            call_timeout=settings.client_call_timeout,
        )
        await _open_pool(pg_store)
        try:
            yield pg_store
        finally:
            await pg_store.close()
        return
    ports = await _factory_worker_ports(settings)
    try:
        for unused in (ports.notifier, ports.leader_lock, ports.rate_limiter):
            if unused is not None:
                await unused.close()
        check_port("store", ports.store, QueueStore)  # the operator's JobAdmin too
        yield cast("QueueStore", ports.store)
    finally:
        await ports.store.close()


# -- demo and throwaway databases --------------------------------------------------------


async def drop_schema(*, dsn: str, schema_name: str) -> None:
    """Drop ``schema_name`` and everything in it (a missing schema is fine)."""
    schema = Schema(schema_name)
    async with asyncpg_migrate.open_connection(require_pg_dsn(dsn)) as conn:
        await asyncpg_migrate.drop_schema(conn, schema)


@contextlib.contextmanager
def open_embedded_postgres(*, prefix: str = "taskq_pg_") -> Iterator[EmbeddedPostgres]:
    """A temporary Postgres server (the ``embedded`` extra), stopped and deleted on exit.

    Its files live in a new temporary directory named ``<prefix>…``; the
    yielded server's ``dsn`` connects to it as the ``postgres`` superuser.

    Raises ``ConfigurationError`` when the ``embedded-postgres`` package is
    not installed and ``StoreUnavailable`` when the server cannot start.
    """
    from taskq.adapters.postgres.embedded import start_embedded_postgres

    server = start_embedded_postgres(prefix=prefix)
    try:
        yield server
    finally:
        server.stop()
