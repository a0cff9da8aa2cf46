"""A worker on the memory adapter with a fake clock, driven step by step by a test."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.di import Dependencies
from taskq.app.settings import WorkerSettings
from taskq.app.worker import Worker, WorkerPorts
from taskq.app.worker.batching import GroupCommit
from taskq.app.worker.consumer import Dispatcher
from taskq.app.worker.events import LOGGER_NAME
from taskq.app.worker.outcome_writes import Completer
from taskq.app.worker.protocols import ActorLike
from taskq.app.worker.refused_writes import finish_flush
from taskq.app.worker.start_gate import StartGate
from taskq.app.worker.start_marks import StartMarks
from taskq.app.worker.state import WorkerState
from taskq.domain.job import ClaimedJob, Job
from taskq.ports.queue_store import QueueStore
from taskq.ports.rate_limiter import RateLimiter
from taskq.ports.store_params import ClaimRequest


class StoreProxy:
    """The memory store with some calls overridden by a subclass; every other call is its own.

    The tests' stores that fail, slow down or record a few calls are one of these.
    """

    def __init__(self, inner: MemoryQueueStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def make_settings(**values: Any) -> WorkerSettings:
    """Worker settings from ``values`` and the defaults (the environment is not read)."""
    return WorkerSettings.load_from_dict({"max_concurrency": 4, **values})


def memory_ports(
    backend: MemoryBackend,
    clock: FakeClock,
    store: QueueStore | None = None,
    rate_limiter: RateLimiter | None = None,
) -> WorkerPorts:
    return WorkerPorts(
        store=store if store is not None else backend.store(),
        leader_lock=backend.leader_lock(),
        notifier=backend.notifier(),
        rate_limiter=rate_limiter if rate_limiter is not None else backend.rate_limiter(),
        clock=clock,
    )


class WorkerRun:
    """One worker process on a shared memory backend, run as a task on the test's loop.

    Every instance is remembered so the test teardown can cancel a worker a
    failing test left running (see ``conftest``).
    """

    instances: ClassVar[list[WorkerRun]] = []

    def __init__(
        self,
        backend: MemoryBackend,
        clock: FakeClock,
        registry: Mapping[str, ActorLike],
        settings: WorkerSettings | None = None,
        *,
        store: Any = None,
        rate_limiter: Any = None,
        **options: Any,
    ) -> None:
        self.clock = clock
        self.ports = memory_ports(backend, clock, store, rate_limiter)
        self.hard_exits: list[int] = []
        self.worker = Worker(
            settings or make_settings(),
            registry,
            self.ports,
            hard_trip=False,
            hard_exit=self.hard_exits.append,
            rng=options.pop("rng", random.Random(7)),
            **options,
        )
        self.task: asyncio.Task[int] | None = None
        WorkerRun.instances.append(self)

    @property
    def store(self) -> MemoryQueueStore:
        return self.ports.store  # type: ignore[return-value]

    @property
    def state(self) -> WorkerState:
        return self.worker.state

    async def start(self) -> None:
        self.task = asyncio.create_task(self.worker.run())
        await self.clock.run_until_idle()

    async def advance(self, seconds: float) -> None:
        await self.clock.advance_async(seconds)

    async def finish(self, *, within: float = 300.0, step: float = 1.0) -> int:
        """Advance the clock step by step until the worker returns; its exit code."""
        assert self.task is not None
        waited = 0.0
        await self.clock.run_until_idle()
        while not self.task.done() and waited < within:
            await self.clock.advance_async(step)
            waited += step
        assert self.task.done(), f"worker still running after {within}s of fake time"
        return self.task.result()

    async def stop(self, *, within: float = 300.0) -> int:
        self.worker.request_shutdown()
        return await self.finish(within=within)


@asynccontextmanager
async def open_dispatcher(state: WorkerState) -> AsyncIterator[Dispatcher]:
    """A consumer's dispatcher on ``state`` (its batchers running), without the rest of a worker."""
    marks = StartMarks(state)
    state.start_marks = marks
    gate = StartGate(state.store)
    completer: Completer = GroupCommit(
        "completions", finish_flush(state.store), prepare=marks.restamp
    )
    runners = [
        asyncio.create_task(marks.run()),
        asyncio.create_task(completer.run()),
        asyncio.create_task(gate.run()),
    ]
    async with Dependencies().open_worker_scopes() as scopes:
        try:
            dispatcher = Dispatcher(state, scopes, completer=completer, marks=marks, gate=gate)
            yield dispatcher
        finally:
            await dispatcher.close()
            for runner in (runners[0], runners[2]):
                runner.cancel()
            await asyncio.gather(runners[0], runners[2], return_exceptions=True)
            await completer.close(runners[1])


async def claim_one(
    store: QueueStore, *, worker_id: str, queue: str, actor: str, started: bool = False
) -> ClaimedJob:
    """Claim the one due job of ``actor`` on ``queue`` for ``worker_id`` (a 60 s lease), as
    a claim the test makes itself rather than the worker's producer; ``started``: as for
    a consumer waiting for it (the claim marks it started), else claimed ahead."""
    [claimed] = await store.claim(
        ClaimRequest(
            worker_id=worker_id,
            queues=[queue],
            actors=[actor],
            limit=1,
            lease=timedelta(seconds=60),
            start_now=1 if started else 0,
        )
    )
    return claimed


async def job(store: MemoryQueueStore, job_id: int) -> Job:
    found = await store.get(job_id)
    assert found is not None
    return found


def events_named(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    """The worker's structured records with event ``name``, oldest first."""
    return [
        r for r in caplog.records if r.name == LOGGER_NAME and getattr(r, "event", None) == name
    ]


def fields(record: logging.LogRecord) -> dict[str, Any]:
    value = getattr(record, "fields", None)
    assert isinstance(value, dict)
    return value


async def cancel_leftover_workers() -> None:
    """Cancel the workers a test left running (after a failed assertion)."""
    runs, WorkerRun.instances = WorkerRun.instances, []
    tasks = [r.task for r in runs if r.task is not None and not r.task.done()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# -- importable targets for TASKQ_DRIVER / --actors specs in tests ----------------------


def not_ports(settings: WorkerSettings) -> object:
    """A TASKQ_DRIVER factory that returns the wrong thing."""
    return {"store": None}


async def async_memory_ports(settings: WorkerSettings) -> WorkerPorts:
    """An async TASKQ_DRIVER factory (awaited by the composition root)."""
    from taskq.app.composition import memory_worker_ports

    return memory_worker_ports(settings)
