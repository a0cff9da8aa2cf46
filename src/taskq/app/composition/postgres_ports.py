"""The worker ports built on Postgres (``TASKQ_DRIVER`` asyncpg or psycopg)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from taskq.adapters.asyncpg import migrate as asyncpg_migrate
from taskq.adapters.postgres.migrator import check_schema_current, discover_migrations
from taskq.adapters.postgres.schema import Schema
from taskq.app.composition.drivers import DRIVER_KITS, Closeable, new_store, open_pool
from taskq.app.composition.redis_limiter import redis_rate_limiter
from taskq.app.connection_overrides import check_overrides, dedicated_conn, store_source
from taskq.app.connections import WorkerConnections
from taskq.app.settings import WorkerSettings, require_pg_dsn
from taskq.app.worker.ports import WorkerPorts
from taskq.domain.errors import ConfigurationError, TaskQError
from taskq.ports.clock import Clock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import WorkerStore
from taskq.ports.rate_limiter import RateLimiter

if TYPE_CHECKING:
    from taskq.adapters.postgres.store import PooledQueueStore


def _worker_pool_max(settings: WorkerSettings) -> int:
    # One pool serves what the guide splits into dispatcher, heartbeat and worker pools.
    return settings.dispatcher_pool_size + settings.heartbeat_pool_size + settings.worker_pool_size


async def postgres_worker_ports(
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
    kit = DRIVER_KITS[settings.driver]()
    check_overrides(
        connections, pool_type=kit.pool_type, conn_type=kit.conn_type, driver=settings.driver
    )
    _refuse_pooled_direct(settings, connections, store, leader_lock, notifier)
    owned: set[str] = set()
    built: list[Closeable] = []
    on_dsn: list[str] = []  # the ports that open their own connection from the DSN
    try:
        pg_limiter: RateLimiter | None = None
        if store is None:
            source = store_source(connections, kit.pool_type, settings.driver)
            pg_store = new_store(
                kit,
                settings,
                require_pg_dsn(dsn) if source is None else source,
                schema,
                max_size=_worker_pool_max(settings),
            )
            pool = await open_pool(pg_store)
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
            rate_limiter = await redis_rate_limiter(settings, schema, connections, pg_limiter)
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
