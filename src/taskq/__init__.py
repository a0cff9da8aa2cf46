"""TaskQ: Postgres-backed, asyncio-native background jobs.

The public API. ``import taskq`` is cheap: it loads no database driver and
not the worker runtime (``worker_main`` is imported on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from taskq.app.actors import ActorRef, actor
from taskq.app.client import JobsClient
from taskq.app.connections import WorkerConnections
from taskq.app.context import JobContext
from taskq.app.di import Dependencies, Scope
from taskq.app.handle import JobHandle
from taskq.app.settings import WorkerSettings
from taskq.domain.errors import (
    ActorConfigDriftError,
    ActorConfigDriftList,
    ActorSignatureError,
    AttemptTimeout,
    ConfigurationError,
    DeadlineExceeded,
    EnqueueRefused,
    IdempotencyKeyLockTimeoutError,
    JobFailed,
    JobNotFound,
    LeaseLost,
    MaxPendingExceeded,
    MaxPendingLockTimeoutError,
    PayloadValidationError,
    PoolWaitTimeout,
    RegistryError,
    RowLockTimeout,
    SchemaNotMigrated,
    ServerAnswerTimeout,
    SettingsInvariantError,
    StoreClosed,
    StoreTimeout,
    StoreUnavailable,
    TaskQError,
    TransactionAborted,
    UniqueForLockTimeoutError,
    UnknownActorError,
)
from taskq.domain.limits import ConcurrencyLimit, RateLimit
from taskq.domain.outcomes import RetryAfter, Snooze
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus

if TYPE_CHECKING:  # typed for checkers, imported lazily at run time
    from taskq.app.worker.main import worker_main

# Loaded on first access: the worker runtime is heavy and not needed to enqueue.
_LAZY = {"worker_main": "taskq.app.worker.main"}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'taskq' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ActorConfigDriftError",
    "ActorConfigDriftList",
    "ActorRef",
    "ActorSignatureError",
    "AttemptTimeout",
    "ConcurrencyLimit",
    "ConfigurationError",
    "DeadlineExceeded",
    "Dependencies",
    "EnqueueRefused",
    "IdempotencyKeyLockTimeoutError",
    "JobContext",
    "JobFailed",
    "JobHandle",
    "JobNotFound",
    "JobStatus",
    "JobsClient",
    "LeaseLost",
    "MaxPendingExceeded",
    "MaxPendingLockTimeoutError",
    "PayloadValidationError",
    "PoolWaitTimeout",
    "RateLimit",
    "RegistryError",
    "RetryAfter",
    "RetryPolicy",
    "RowLockTimeout",
    "SchemaNotMigrated",
    "Scope",
    "ServerAnswerTimeout",
    "SettingsInvariantError",
    "Snooze",
    "StoreClosed",
    "StoreTimeout",
    "StoreUnavailable",
    "TaskQError",
    "TransactionAborted",
    "UniqueForLockTimeoutError",
    "UnknownActorError",
    "WorkerConnections",
    "WorkerSettings",
    "actor",
    "worker_main",
]
