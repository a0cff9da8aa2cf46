"""Connection hook points at the import path the connections reference uses.

``from taskq.connections import WorkerConnections`` and the helpers beside it;
the implementation is :mod:`taskq.app.connections`.
"""

from __future__ import annotations

from taskq.app.connections import (
    DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
    DEFAULT_STATEMENT_CACHE_SIZE,
    ConnFactory,
    PoolFactory,
    RedisFactory,
    WorkerConnections,
    bounded_lock_budget_ms,
    connection_init_hook,
    lock_budget_command_timeout_secs,
    lock_budget_pairs,
    statement_cache_kwargs,
    with_connection_init,
)

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
