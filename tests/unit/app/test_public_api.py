"""The public API of ``import taskq``: pinned names, the right objects, a cheap import."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import taskq
from taskq.domain import errors

PUBLIC_API = [
    "ActorConfigDriftError",
    "ActorConfigDriftList",
    "ActorRef",
    "ActorSignatureError",
    "ConcurrencyLimit",
    "ConfigurationError",
    "AttemptTimeout",
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
    "RateLimit",
    "RegistryError",
    "SchemaNotMigrated",
    "RetryAfter",
    "RetryPolicy",
    "Scope",
    "SettingsInvariantError",
    "Snooze",
    "StoreClosed",
    "StoreUnavailable",
    "StoreTimeout",
    "RowLockTimeout",
    "PoolWaitTimeout",
    "ServerAnswerTimeout",
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

PUBLIC_ERRORS = [
    "TaskQError",
    "ConfigurationError",
    "SettingsInvariantError",
    "PayloadValidationError",
    "UnknownActorError",
    "ActorSignatureError",
    "ActorConfigDriftError",
    "ActorConfigDriftList",
    "AttemptTimeout",
    "DeadlineExceeded",
    "EnqueueRefused",
    "MaxPendingExceeded",
    "MaxPendingLockTimeoutError",
    "UniqueForLockTimeoutError",
    "IdempotencyKeyLockTimeoutError",
    "JobNotFound",
    "JobFailed",
    "LeaseLost",
    "StoreUnavailable",
    "StoreClosed",
    "StoreTimeout",
    "RowLockTimeout",
    "PoolWaitTimeout",
    "ServerAnswerTimeout",
    "TransactionAborted",
    "RegistryError",
]


def test_all_is_pinned() -> None:
    """taskq.__all__ is exactly the documented public API (a change here is an API change)."""
    assert sorted(taskq.__all__) == sorted(PUBLIC_API)
    assert len(taskq.__all__) == len(set(taskq.__all__))


@pytest.mark.parametrize("name", [n for n in PUBLIC_API if n != "worker_main"])
def test_every_eager_name_resolves(name: str) -> None:
    """Every public name except the lazy worker_main is importable from taskq."""
    assert getattr(taskq, name) is not None


def test_names_are_the_implementing_objects() -> None:
    """The re-exports are the very objects of the modules that define them."""
    from taskq.app.actors import ActorRef, actor
    from taskq.app.client import JobsClient
    from taskq.app.connections import WorkerConnections
    from taskq.app.context import JobContext
    from taskq.app.di import Scope
    from taskq.app.handle import JobHandle
    from taskq.app.settings import WorkerSettings
    from taskq.domain.limits import ConcurrencyLimit, RateLimit
    from taskq.domain.outcomes import RetryAfter, Snooze
    from taskq.domain.retry import RetryPolicy
    from taskq.domain.status import JobStatus

    assert taskq.actor is actor
    assert taskq.ActorRef is ActorRef
    assert taskq.JobsClient is JobsClient
    assert taskq.JobHandle is JobHandle
    assert taskq.JobContext is JobContext
    assert taskq.Scope is Scope
    assert taskq.WorkerConnections is WorkerConnections
    assert taskq.WorkerSettings is WorkerSettings
    assert taskq.RetryPolicy is RetryPolicy
    assert taskq.Snooze is Snooze
    assert taskq.RetryAfter is RetryAfter
    assert taskq.JobStatus is JobStatus
    assert taskq.RateLimit is RateLimit
    assert taskq.ConcurrencyLimit is ConcurrencyLimit


@pytest.mark.parametrize("name", PUBLIC_ERRORS)
def test_public_errors_are_the_domain_errors(name: str) -> None:
    """Each public error is the domain hierarchy's class and a TaskQError."""
    exported = getattr(taskq, name)
    assert exported is getattr(errors, name)
    assert issubclass(exported, taskq.TaskQError)


def test_worker_main_is_lazy_and_listed_in_dir() -> None:
    """worker_main is resolved on first access from the worker runtime and shows in dir()."""
    assert "worker_main" in dir(taskq)
    assert taskq.worker_main is importlib.import_module("taskq.app.worker.main").worker_main


def test_unknown_attributes_raise_attribute_error() -> None:
    """A name that is not public raises AttributeError, as for any module."""
    with pytest.raises(AttributeError, match="no_such_thing"):
        _ = taskq.no_such_thing


def test_import_taskq_loads_no_driver_and_no_worker() -> None:
    """``import taskq`` in a fresh interpreter imports no driver, adapter or worker runtime."""
    probe = (
        "import json, sys, taskq; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('asyncpg', 'psycopg', 'psycopg_pool', 'redis') or m.startswith('taskq.adapters') "
        "or m.startswith(('taskq.app.worker', 'taskq.app.composition')))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == []
