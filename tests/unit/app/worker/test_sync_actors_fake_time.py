"""Sync actors on a fake clock: the documented drive loop does not outrun their threads,
and their THREAD-scope instances are torn down in their own threads."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Annotated

import pytest
from pydantic import BaseModel

from taskq import JobsClient, WorkerSettings
from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.app.actors import actor
from taskq.app.di import Dependencies, Scope
from taskq.app.worker import run_worker
from taskq.domain.status import JobStatus


class Number(BaseModel):
    n: int


@actor
def blocking(payload: Number) -> int:
    time.sleep(0.1)  # real work in the actor's thread, unseen by the event loop
    return payload.n


@actor
def query(payload: Number, db: Annotated[sqlite3.Connection, Scope.THREAD]) -> int:
    value: int = db.execute("select ?", (payload.n,)).fetchone()[0]
    return value


async def _drive(
    clock: FakeClock, backend: MemoryBackend, ref: object, deps: Dependencies | None = None
) -> int:
    """The docs' loop (running-workers: testing with a real worker, no Postgres)."""
    settings = WorkerSettings.load_from_dict(
        {"idle_settle_window": 0, "max_concurrency": 2, "idle_max_runtime": 60}
    )
    worker = asyncio.create_task(
        run_worker(
            settings,
            [ref],
            store=backend.store(),
            leader_lock=backend.leader_lock(),
            notifier=backend.notifier(),
            clock=clock,
            until_idle=True,
            handle_signals=False,
            dependencies=deps,
        )
    )
    while not worker.done():
        await clock.advance_async(1)
    return worker.result()


async def test_fake_time_waits_for_sync_actor_threads() -> None:
    """Three 0.1 s sync jobs, deadlines 10 fake minutes away, idle_max_runtime 60 fake
    seconds: all succeed and only a few fake seconds pass (it raced to 18,988)."""
    clock = FakeClock()
    backend = MemoryBackend(clock=clock)
    client = JobsClient(backend.store(), clock=clock)
    deadline = clock.now() + timedelta(minutes=10)
    handles = [
        await client.enqueue(blocking, Number(n=i), schedule_to_close=deadline) for i in range(3)
    ]
    assert await _drive(clock, backend, blocking) == 0
    assert [(await h.get()).status for h in handles] == [JobStatus.SUCCEEDED] * 3
    assert clock.monotonic() < 10


async def test_thread_scope_instances_are_torn_down_in_their_own_thread(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sqlite3 connection (usable only in the thread that made it) at THREAD scope is
    closed by that thread when the worker stops; none left open, no teardown failure."""
    made: dict[int, sqlite3.Connection] = {}
    closed: list[int] = []

    def connect() -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(":memory:")
        made[threading.get_ident()] = conn
        yield conn
        conn.close()  # raises ProgrammingError in any other thread
        closed.append(threading.get_ident())

    deps = Dependencies()
    deps.register(sqlite3.Connection, connect, scope=Scope.THREAD)
    clock = FakeClock()
    backend = MemoryBackend(clock=clock)
    client = JobsClient(backend.store(), clock=clock)
    handles = [await client.enqueue(query, Number(n=i)) for i in range(4)]
    assert await _drive(clock, backend, query, deps) == 0
    assert [(await h.get()).result for h in handles] == [0, 1, 2, 3]
    assert made
    assert sorted(closed) == sorted(made)
    assert not [r for r in caplog.records if r.getMessage() == "di-teardown-failed"]
