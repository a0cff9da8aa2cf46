"""``WorkerConnections`` overrides checked against a built-in Postgres driver.

The composition root builds the Postgres ports; this module decides what a
port runs on when its role is overridden: the given object (caller-owned), a
factory's checked product (TaskQ-owned), or the DSN when neither is given. It
names no adapter: the driver's pool and connection types are passed in.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from taskq.app.connections import WorkerConnections
from taskq.app.worker import events
from taskq.domain.errors import ConfigurationError, StoreUnavailable, TaskQError

#: Logged when ``WorkerConnections`` sets more than one pool role: the store runs on one pool.
WORKER_CONNECTIONS_POOL_ROLES: Final = "worker-connections-pool-roles"

_POOL_ROLES: Final = ("dispatcher_pool", "heartbeat_pool", "worker_pool")
_CONN_ROLES: Final = ("notify_conn", "leader_conn")


def check_overrides(
    connections: WorkerConnections, *, pool_type: type, conn_type: type, driver: str
) -> None:
    """Refuse a given pool or connection of another driver before anything is opened.

    Factory products are checked when made (see :func:`store_source`).
    """
    for role in _POOL_ROLES:
        _require_driver(getattr(connections, role), pool_type, role, driver)
    for role in _CONN_ROLES:
        _require_driver(getattr(connections, role), conn_type, role, driver)


def store_source(connections: WorkerConnections, pool_type: type, driver: str) -> Any:
    """The pool (or checked pool factory) the store runs on; None for the DSN.

    TaskQ's store runs claims, heartbeats and terminal writes on one pool, so
    only the first given of the dispatcher, heartbeat and worker roles is used.
    """
    given = [
        role
        for role in _POOL_ROLES
        if getattr(connections, role) is not None
        or getattr(connections, f"{role}_factory") is not None
    ]
    if not given:
        return None
    role = given[0]
    if len(given) > 1:
        events.emit(
            WORKER_CONNECTIONS_POOL_ROLES,
            logging.WARNING,
            used=role,
            ignored=given[1:],
            reason="the store runs claims, heartbeats and terminal writes on one pool",
        )
    pool = getattr(connections, role)
    if pool is not None:
        return pool
    return _checked_factory(getattr(connections, f"{role}_factory"), pool_type, role, driver)


async def dedicated_conn(
    connections: WorkerConnections, role: str, conn_type: type, driver: str
) -> tuple[Any, bool, Callable[[], Awaitable[Any]] | None]:
    """The role's override connection, whether TaskQ owns it, and the checked factory
    that makes its replacements; (None, False, None) for the DSN."""
    given = getattr(connections, role)
    if given is not None:
        return given, False, None
    factory = getattr(connections, f"{role}_factory")
    if factory is None:
        return None, False, None
    checked = _checked_factory(factory, conn_type, role, driver)
    return await checked(), True, checked


def _require_driver(given: object, expected: type, role: str, driver: str) -> None:
    """Refuse an override object of another driver, naming its role."""
    if given is not None and not isinstance(given, expected):
        raise ConfigurationError(
            f"WorkerConnections.{role}: TASKQ_DRIVER={driver} needs a "
            f"{expected.__module__}.{expected.__qualname__}, got {type(given).__name__}"
        )


def _checked_factory(
    factory: Callable[[], Awaitable[Any]], expected: type, role: str, driver: str
) -> Callable[[], Awaitable[Any]]:
    """``factory`` whose product is checked against the driver; a failure to connect
    becomes ``StoreUnavailable`` so the worker refuses to start instead of crashing."""

    async def make() -> Any:
        try:
            product = await factory()
        except TaskQError:
            raise
        except Exception as exc:
            raise StoreUnavailable(
                f"WorkerConnections.{role}_factory failed: {type(exc).__name__}: {exc}"
            ) from exc
        if product is None:
            # Not a fallback to the DSN: the factory is there because the DSN may not do.
            raise ConfigurationError(
                f"WorkerConnections.{role}_factory returned None; it must return "
                f"a {expected.__module__}.{expected.__qualname__} (TASKQ_DRIVER={driver})"
            )
        try:
            _require_driver(product, expected, f"{role}_factory", driver)
        except ConfigurationError:
            await _close_quietly(product)
            raise
        return product

    return make


async def _close_quietly(resource: object) -> None:
    """Best-effort close of a rejected factory product (sync or async ``close``)."""
    close = getattr(resource, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            result = close()
            if inspect.isawaitable(result):
                await result


__all__ = [
    "WORKER_CONNECTIONS_POOL_ROLES",
    "check_overrides",
    "dedicated_conn",
    "store_source",
]
