"""Dependency teardowns are bounded by the termination grace: the watchdog covers the
scopes' close, so a teardown that never ends cannot keep the worker alive."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, events_named, fields, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import ActorRef, actor
from taskq.app.di import Dependencies, Scope
from taskq.app.worker import events

REPO = Path(__file__).resolve().parents[4]


class Empty(BaseModel):
    pass


class Pool:
    pass


async def never_closes() -> AsyncIterator[Pool]:
    yield Pool()
    await asyncio.Event().wait()


@actor
async def process_user(payload: Empty, pool: Annotated[Pool, Scope.PROCESS]) -> None: ...


@actor
async def job_user(payload: Empty, pool: Annotated[Pool, Scope.TRANSIENT]) -> None: ...


@pytest.mark.parametrize(
    ("scope", "ref"), [(Scope.PROCESS, process_user), (Scope.TRANSIENT, job_user)]
)
async def test_a_teardown_that_never_ends_trips_the_watchdog_at_the_grace(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
    scope: Scope,
    ref: ActorRef[Empty, None],
) -> None:
    deps = Dependencies()
    deps.register(Pool, never_closes, scope=scope)
    await client.enqueue(ref.new_job({}, now=clock.now()))
    settings = make_settings(
        termination_grace_period=20, cancellation_grace_period=5, cleanup_grace_period=5
    )
    run = WorkerRun(backend, clock, {ref.name: ref}, settings, dependencies=deps)
    await run.start()
    await run.advance(1)
    started = clock.monotonic()
    assert await run.stop(within=40) == 2
    assert clock.monotonic() - started <= 22
    [trip] = events_named(caplog, events.WORKER_WATCHDOG_TRIP)
    assert fields(trip)["detector"] == "shutdown_deadline"


@pytest.mark.parametrize("mode", ["process", "transient"])
def test_a_worker_process_whose_teardown_hangs_exits_2_at_the_grace(mode: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    with subprocess.Popen(
        [sys.executable, "-m", "tests.unit.app.worker.hanging_teardown_worker", mode],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as worker:
        try:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
            time.sleep(0.5)
            worker.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            _, stderr = worker.communicate(timeout=30)
            took = time.monotonic() - signalled
        finally:
            if worker.poll() is None:
                worker.kill()
    assert worker.returncode == 2, stderr
    assert 6 <= took <= 12, took  # termination_grace_period is 7
    assert "worker-watchdog-trip" in stderr
