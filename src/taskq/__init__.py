"""TaskQ: Postgres-backed, asyncio-native background jobs.

The public API. ``import taskq`` is cheap: each name is imported on first use
(``from taskq import actor`` loads the actors module, not the worker runtime
or a database driver), so ``taskq health``, a Kubernetes exec probe, starts
in a fraction of the time the whole API would take to load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typed for checkers, imported lazily at run time
    from taskq.app.actors.decorator import actor
    from taskq.app.actors.ref import ActorRef
    from taskq.app.client import JobsClient
    from taskq.app.connections import WorkerConnections
    from taskq.app.context import JobContext
    from taskq.app.di import Dependencies, Scope
    from taskq.app.handle import JobHandle
    from taskq.app.scheduling.decorator import cron
    from taskq.app.settings import WorkerSettings
    from taskq.app.worker.main import worker_main
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

#: Each public name and the module that defines it, imported on first access.
_LAZY: dict[str, str] = {
    "ActorConfigDriftError": "taskq.domain.errors",
    "ActorConfigDriftList": "taskq.domain.errors",
    "ActorRef": "taskq.app.actors.ref",
    "ActorSignatureError": "taskq.domain.errors",
    "AttemptTimeout": "taskq.domain.errors",
    "ConcurrencyLimit": "taskq.domain.limits",
    "ConfigurationError": "taskq.domain.errors",
    "DeadlineExceeded": "taskq.domain.errors",
    "Dependencies": "taskq.app.di",
    "EnqueueRefused": "taskq.domain.errors",
    "IdempotencyKeyLockTimeoutError": "taskq.domain.errors",
    "JobContext": "taskq.app.context",
    "JobFailed": "taskq.domain.errors",
    "JobHandle": "taskq.app.handle",
    "JobNotFound": "taskq.domain.errors",
    "JobStatus": "taskq.domain.status",
    "JobsClient": "taskq.app.client",
    "LeaseLost": "taskq.domain.errors",
    "MaxPendingExceeded": "taskq.domain.errors",
    "MaxPendingLockTimeoutError": "taskq.domain.errors",
    "PayloadValidationError": "taskq.domain.errors",
    "PoolWaitTimeout": "taskq.domain.errors",
    "RateLimit": "taskq.domain.limits",
    "RegistryError": "taskq.domain.errors",
    "RetryAfter": "taskq.domain.outcomes",
    "RetryPolicy": "taskq.domain.retry",
    "RowLockTimeout": "taskq.domain.errors",
    "SchemaNotMigrated": "taskq.domain.errors",
    "Scope": "taskq.app.di",
    "ServerAnswerTimeout": "taskq.domain.errors",
    "SettingsInvariantError": "taskq.domain.errors",
    "Snooze": "taskq.domain.outcomes",
    "StoreClosed": "taskq.domain.errors",
    "StoreTimeout": "taskq.domain.errors",
    "StoreUnavailable": "taskq.domain.errors",
    "TaskQError": "taskq.domain.errors",
    "TransactionAborted": "taskq.domain.errors",
    "UniqueForLockTimeoutError": "taskq.domain.errors",
    "UnknownActorError": "taskq.domain.errors",
    "WorkerConnections": "taskq.app.connections",
    "WorkerSettings": "taskq.app.settings",
    "actor": "taskq.app.actors.decorator",
    "cron": "taskq.app.scheduling.decorator",
    "worker_main": "taskq.app.worker.main",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'taskq' has no attribute {name!r}")
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
    "cron",
    "worker_main",
]
