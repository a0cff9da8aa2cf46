"""The ports a worker runs on: passed by the caller, built on Postgres, or made by a factory.

Adapters are imported inside the functions: building a worker on the memory
adapter must not import a database driver, and a driver whose extra is missing
fails only the worker that asked for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskq.app.composition.drivers import Closeable
from taskq.app.composition.factory import factory_worker_ports
from taskq.app.composition.postgres_ports import postgres_worker_ports
from taskq.app.connections import WorkerConnections
from taskq.app.observability.metrics import new_metrics_registry
from taskq.app.port_check import check_given_ports, check_worker_ports
from taskq.app.settings import BUILTIN_DRIVERS, WorkerSettings
from taskq.app.worker.ports import WorkerPorts
from taskq.domain.errors import ConfigurationError
from taskq.ports.clock import Clock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import WorkerStore
from taskq.ports.rate_limiter import RateLimiter

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


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
        return await postgres_worker_ports(
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
    built = await factory_worker_ports(settings)
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


async def _close_unused(built: Closeable | None, passed: object) -> None:
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


def _system_clock() -> Clock:
    from taskq.adapters.system_clock import SystemClock

    return SystemClock()
