"""TASKQ_DRIVER factories with flawed custom adapters, for the worker-process tests."""

from __future__ import annotations

from typing import Any

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.adapters.system_clock import SystemClock
from taskq.app.settings import WorkerSettings
from taskq.app.worker.ports import WorkerPorts


class Without:
    """A port that hides some of the wrapped port's methods (a custom adapter missing them)."""

    def __init__(self, inner: object, *hidden: str) -> None:
        self._inner, self._hidden = inner, hidden

    def __getattr__(self, name: str) -> Any:
        if name in self._hidden:
            raise AttributeError(name)
        return getattr(self._inner, name)


class BuggyStore:
    """A store whose sync_actor_configs has a bug (an unexpected KeyError)."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    async def sync_actor_configs(self, *args: Any, **kwargs: Any) -> Any:
        raise KeyError("audit_table")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _ports(store: object = None, leader_lock: object = None) -> WorkerPorts:
    backend = MemoryBackend(clock=SystemClock())
    return WorkerPorts(
        store=store if store is not None else backend.store(),  # type: ignore[arg-type]
        leader_lock=leader_lock if leader_lock is not None else backend.leader_lock(),  # type: ignore[arg-type]
        clock=backend.clock,
    )


def no_claim(settings: WorkerSettings) -> WorkerPorts:
    return _ports(
        store=Without(MemoryBackend(clock=SystemClock()).store(), "claim", "finish_and_claim")
    )


def no_finish_many(settings: WorkerSettings) -> WorkerPorts:
    return _ports(store=Without(MemoryBackend(clock=SystemClock()).store(), "finish_many"))


class OldStrandedRead:
    """A store still on the earlier ``stranded_actors(queues=None)`` (no ``stale_after``)."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def stranded_actors(self, queues: object = None) -> dict[str, int]:
        return {}


def old_stranded_read(settings: WorkerSettings) -> WorkerPorts:
    return _ports(store=OldStrandedRead(MemoryBackend(clock=SystemClock()).store()))


def lock_is_a_store(settings: WorkerSettings) -> WorkerPorts:
    return _ports(leader_lock=MemoryBackend(clock=SystemClock()).store())


def buggy_store(settings: WorkerSettings) -> WorkerPorts:
    return _ports(store=BuggyStore(MemoryBackend(clock=SystemClock()).store()))


#: The clock fake_clock_ports returns (so a test can compare).
FACTORY_CLOCK = FakeClock()


def fake_clock_ports(settings: WorkerSettings) -> WorkerPorts:
    backend = MemoryBackend(clock=FACTORY_CLOCK)
    return WorkerPorts(
        store=backend.store(), leader_lock=backend.leader_lock(), clock=FACTORY_CLOCK
    )
