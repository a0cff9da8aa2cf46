"""Connection hook points: bring your own pools, connections and Redis client.

By default TaskQ builds its pools, its two dedicated connections and its Redis
client from the DSNs in the settings. :class:`WorkerConnections` replaces any
of them per role with either

1. a pre-constructed resource, which stays **caller-owned**: TaskQ uses it and
   never closes it (close it in your own lifespan), or
2. a zero-argument async factory, whose product is **TaskQ-owned**: TaskQ
   calls it when the role is needed and closes the result on teardown.

A role left ``None`` on both slots is built from the DSN as before. Giving both
for one role is a configuration error.

The module also holds the small pure helpers every TaskQ-built pool shares:
statement-cache kwargs (zero under a transaction-mode pooler) and the
arithmetic that keeps enqueue lock budgets inside a pool's per-query timeout.

It lives in the app layer and names no driver at run time: the aliases are
deliberately loose so asyncpg and psycopg pools (or a user adapter's) fit.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from taskq.domain.lock_budget import LOCK_BUDGET_COMMAND_TIMEOUT_SHARE, bounded_lock_budget_ms

if TYPE_CHECKING:
    from taskq.app.settings import TaskQSettings

__all__ = [
    "DEFAULT_MAX_CACHED_STATEMENT_LIFETIME",
    "DEFAULT_STATEMENT_CACHE_SIZE",
    "ConnFactory",
    "PoolFactory",
    "RedisFactory",
    "WorkerConnections",
    "bounded_lock_budget_ms",
    "connection_init_hook",
    "lock_budget_command_timeout_secs",
    "lock_budget_pairs",
    "statement_cache_kwargs",
    "with_connection_init",
]

_log = logging.getLogger(__name__)

DEFAULT_STATEMENT_CACHE_SIZE: Final = 512
DEFAULT_MAX_CACHED_STATEMENT_LIFETIME: Final = 3600

#: Zero-argument async factory producing a driver pool (asyncpg ``Pool``,
#: psycopg ``AsyncConnectionPool``, ...). TaskQ closes what it returns.
PoolFactory: TypeAlias = Callable[[], Awaitable[Any]]
#: Zero-argument async factory producing one driver connection.
ConnFactory: TypeAlias = Callable[[], Awaitable[Any]]
#: Zero-argument async factory producing a ``redis.asyncio.Redis`` client.
RedisFactory: TypeAlias = Callable[[], Awaitable[Any]]
#: Per-connection setup run right after a connection opens (codecs, prepares).
ConnInit: TypeAlias = Callable[[Any], Awaitable[None]]


# Attribute a wrapped factory carries so the worker's per-slot pool can read
# back the hook the LOOP-scope connection got (drivers expose no read-back).
_CONNECTION_INIT_HOOK_ATTR: Final = "__taskq_connection_init__"

# How long closing a connection whose init hook failed may take: a dead
# server must not turn that cleanup into a wedge.
_INIT_FAILURE_CLOSE_TIMEOUT_SECS: Final = 5.0

_ROLES: Final = (
    ("dispatcher_pool", "dispatcher_pool_factory"),
    ("heartbeat_pool", "heartbeat_pool_factory"),
    ("worker_pool", "worker_pool_factory"),
    ("notify_conn", "notify_conn_factory"),
    ("leader_conn", "leader_conn_factory"),
    ("redis_client", "redis_client_factory"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerConnections:
    """Per-role connection overrides for the worker.

    Each role has a ``<role>`` slot (pre-constructed, caller-owned) and a
    ``<role>_factory`` slot (zero-argument async factory, TaskQ-owned). Leave
    both ``None`` for DSN-based construction. Roles and the DSN each replaces:

    - ``dispatcher_pool`` (``pg_dsn_direct``), ``heartbeat_pool``
      (``pg_dsn_direct``; an overriding pool must set its own per-query
      timeout, e.g. ``heartbeat_command_timeout``), ``worker_pool``
      (``pg_dsn_pooled``);
    - ``notify_conn`` (LISTEN; TaskQ still issues ``LISTEN``) and
      ``leader_conn`` (session advisory lock): both must be direct, session
      connections, never through a transaction-mode pooler;
    - ``redis_client``: a factory-built client replaces TaskQ's resilience
      defaults too (health checks, keepalive, socket timeout, retry), so it
      must set them itself.

    Frozen so the both-slots check in ``__post_init__`` cannot be bypassed
    by a later assignment.
    """

    dispatcher_pool: Any | None = None
    dispatcher_pool_factory: PoolFactory | None = None
    heartbeat_pool: Any | None = None
    heartbeat_pool_factory: PoolFactory | None = None
    worker_pool: Any | None = None
    worker_pool_factory: PoolFactory | None = None
    notify_conn: Any | None = None
    notify_conn_factory: ConnFactory | None = None
    leader_conn: Any | None = None
    leader_conn_factory: ConnFactory | None = None
    redis_client: Any | None = None
    redis_client_factory: RedisFactory | None = None

    def __post_init__(self) -> None:
        """Reject a concrete resource and a factory for the same role."""
        for concrete, factory in _ROLES:
            if getattr(self, concrete) is not None and getattr(self, factory) is not None:
                raise ValueError(
                    f"WorkerConnections: provide either {concrete!r} or "
                    f"{factory!r}, not both (role would be ambiguous)."
                )

    def has_any(self) -> bool:
        """True if any override (concrete or factory) is set."""
        return any(getattr(self, f.name) is not None for f in fields(self))


def statement_cache_kwargs(settings: TaskQSettings | None = None) -> dict[str, int]:
    """The statement-cache kwargs every TaskQ-built pool passes (a fresh dict).

    With ``settings``, the operator's ``TASKQ_STATEMENT_CACHE_SIZE`` and
    ``TASKQ_MAX_CACHED_STATEMENT_LIFETIME``; without, the module defaults.
    Under ``TASKQ_PG_IS_POOLED`` both are ``0`` whatever the tuning says: a
    transaction-mode pooler may send a prepared statement's Bind to a
    different server connection than its Parse, and the driver's
    per-connection cache cannot notice, so no cache size but zero is safe.

    Callers forward the two values as explicit keyword arguments rather than
    splatting the dict, so the driver call stays type-checked.
    """
    if settings is None:
        return {
            "statement_cache_size": DEFAULT_STATEMENT_CACHE_SIZE,
            "max_cached_statement_lifetime": DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
        }
    if settings.pg_is_pooled:
        return {"statement_cache_size": 0, "max_cached_statement_lifetime": 0}
    return {
        "statement_cache_size": settings.statement_cache_size,
        "max_cached_statement_lifetime": settings.max_cached_statement_lifetime,
    }


def lock_budget_command_timeout_secs(
    budgets_ms: Iterable[tuple[float, float]],
    *,
    floor_secs: float,
) -> float:
    """The per-query timeout a TaskQ-built pool needs to deliver its lock budgets.

    ``floor_secs`` is the timeout sized for the shipped defaults; a
    deployment that changes nothing keeps it. Each pair is
    ``(configured_ms, default_ms)`` for one budget. A budget raised above its
    default would be clamped back inside the floor, so the timeout grows to
    ``configured / share``: the raised budget then occupies the same share of
    a larger bound and the server-side ``lock_timeout`` still fires first.

    Budgets at or below their default never move the bound, and neither does
    a non-positive (unbounded) one: no finite bound fits an unbounded wait,
    and dropping the bound would remove the guard every other query on the
    pool relies on.
    """
    bound = floor_secs
    for configured_ms, default_ms in budgets_ms:
        if configured_ms > default_ms:
            bound = max(bound, configured_ms / 1000.0 / LOCK_BUDGET_COMMAND_TIMEOUT_SHARE)
    return bound


def lock_budget_pairs(
    settings: TaskQSettings, field_names: Iterable[str]
) -> list[tuple[float, float]]:
    """``(configured, shipped default)`` for each lock-budget field in ``field_names``.

    The input of :func:`lock_budget_command_timeout_secs`. Each caller names
    the fields of its own model once (the client pool its enqueue budgets);
    the defaults are read off the model's field metadata so they are never
    restated. Raises :class:`ValueError` for a name that is not a field with
    a numeric default.
    """
    model_fields = type(settings).model_fields
    pairs: list[tuple[float, float]] = []
    for name in field_names:
        info = model_fields.get(name)
        default = None if info is None else info.default
        if not isinstance(default, int | float) or isinstance(default, bool):
            raise ValueError(
                f"{name!r} is not a lock-budget field of {type(settings).__name__} "
                "(no numeric default)"
            )
        pairs.append((float(getattr(settings, name)), float(default)))
    return pairs


async def _close_quietly(conn: Any, limit_secs: float) -> None:
    """Close ``conn`` within ``limit_secs``; log, never raise (the caller re-raises its own)."""
    close = getattr(conn, "close", None)
    if not callable(close):
        return
    try:
        async with asyncio.timeout(limit_secs):
            result = close()
            if inspect.isawaitable(result):
                await result
    except Exception as exc:  # TimeoutError included: the hook's error matters more
        _log.warning(
            "connection-init-close-failed", extra={"error": repr(exc), "limit_secs": limit_secs}
        )


def with_connection_init(
    factory: ConnFactory,
    init: ConnInit,
    *,
    close_timeout: float = _INIT_FAILURE_CLOSE_TIMEOUT_SECS,
) -> ConnFactory:
    """Wrap ``factory`` so ``init`` runs once on every connection it produces.

    ``init`` runs right after the factory returns, the position of the
    driver's own ``setup``/``configure`` hook. The wrapper also records
    ``init`` (see :func:`connection_init_hook`) so that when this factory
    provides the LOOP-scope connection, the worker installs the very same
    hook on its per-slot pool; otherwise that setup would silently be missing
    above ``max_concurrency = 1``. Declare the hook here only, not inside
    ``factory`` too, or it runs twice.

    If ``init`` raises, the connection is closed (within ``close_timeout``
    seconds; any close failure is logged, never raised) and the hook's own
    error propagates: a failed hook means no usable connection. Works for
    any connection with a ``close()`` method, async or not.
    """

    # Annotated ``Any``, not a driver type: DI may evaluate these hints at run
    # time, and no driver is importable here by design.
    async def _wrapped() -> Any:
        conn = await factory()
        try:
            await init(conn)
        except BaseException:
            await _close_quietly(conn, close_timeout)
            raise
        return conn

    setattr(_wrapped, _CONNECTION_INIT_HOOK_ATTR, init)
    return _wrapped


def connection_init_hook(factory: object) -> ConnInit | None:
    """The init hook ``factory`` declares (via :func:`with_connection_init`), else ``None``.

    Returns the hook exactly as declared, so a slot pool installs the very
    callable the LOOP-scope connection got. A bare closure or a driver
    ``connect`` partial declares nothing: ``None``.
    """
    hook = getattr(factory, _CONNECTION_INIT_HOOK_ATTR, None)
    if not callable(hook):
        return None
    declared: ConnInit = hook
    return declared
