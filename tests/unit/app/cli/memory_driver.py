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
