"""A ``TASKQ_DRIVER`` factory for the CLI tests: every command's store is a new store on
one shared memory backend (as every ``taskq`` process is a new connection to one schema)."""

from __future__ import annotations

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.app.settings import WorkerSettings
from taskq.app.worker.ports import WorkerPorts

#: The backend the next command runs on; the ``cli`` fixture sets a fresh one per test.
BACKEND = MemoryBackend(clock=FakeClock())


def ports(settings: WorkerSettings) -> WorkerPorts:
    return WorkerPorts(
        store=BACKEND.store(),
        leader_lock=BACKEND.leader_lock(),
        notifier=BACKEND.notifier(),
        clock=BACKEND.clock,
    )


class _WithoutAdmin:
    """A custom store written before the operator role: it lacks JobAdmin's methods."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        if name in ("list_jobs", "retry_job", "worker_status"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def ports_without_admin(settings: WorkerSettings) -> WorkerPorts:
    """``ports`` whose store lacks the operator role."""
    built = ports(settings)
    return WorkerPorts(
        store=_WithoutAdmin(built.store),  # type: ignore[arg-type]
        leader_lock=built.leader_lock,
        notifier=built.notifier,
        clock=built.clock,
    )
