"""A worker on the memory adapter with a fake clock, driven step by step by a test."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.di import Dependencies
from taskq.app.settings import WorkerSettings
from taskq.app.worker import Worker, WorkerPorts
from taskq.app.worker.batching import GroupCommit
from taskq.app.worker.consumer import Dispatcher
from taskq.app.worker.events import LOGGER_NAME
from taskq.app.worker.protocols import ActorLike
from taskq.app.worker.runtime import _finish_flush, _start_flush
from taskq.app.worker.state import WorkerState
from taskq.domain.job import Job


def make_settings(**values: Any) -> WorkerSettings:
    """Worker settings from ``values`` and the defaults (the environment is not read)."""
    return WorkerSettings.load_from_dict({"max_concurrency": 4, **values})


def memory_ports(backend: MemoryBackend, clock: FakeClock) -> WorkerPorts:
    return WorkerPorts(
        store=backend.store(),
        leader_lock=backend.leader_lock(),
        notifier=backend.notifier(),
        rate_limiter=backend.rate_limiter(),
        clock=clock,
    )


class WorkerRun:
    """One worker process on a shared memory backend, run as a task on the test's loop."""

    def __init__(
        self,
        backend: MemoryBackend,
        clock: FakeClock,
        registry: Mapping[str, ActorLike],
        settings: WorkerSettings | None = None,
        **options: Any,
    ) -> None:
        self.clock = clock
        self.ports = memory_ports(backend, clock)
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

    @property
    def store(self) -> MemoryQueueStore:
        store = self.ports.store
        assert isinstance(store, MemoryQueueStore)
        return store

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
    starter = GroupCommit("start-marks", _start_flush(state.store))
    completer = GroupCommit("completions", _finish_flush(state.store))
    runners = [asyncio.create_task(starter.run()), asyncio.create_task(completer.run())]
    async with Dependencies().open_worker_scopes() as scopes:
        try:
            yield Dispatcher(state, scopes, starter=starter, completer=completer)
        finally:
            await starter.close(runners[0])
            await completer.close(runners[1])


async def job(store: MemoryQueueStore, job_id: int) -> Job:
    found = await store.get(job_id)
    assert found is not None
    return found


def events_named(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    """The worker's structured records with event ``name``, oldest first."""
    return [
        r
        for r in caplog.records
        if r.name == LOGGER_NAME and getattr(r, "event", None) == name
    ]


def fields(record: logging.LogRecord) -> dict[str, Any]:
    value = getattr(record, "fields", None)
    assert isinstance(value, dict)
    return value
