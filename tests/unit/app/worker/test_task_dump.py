"""The task dump (watchdog trips and SIGUSR2): await chains, never values."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest
from tests.unit.app.worker.harness import WorkerRun, events_named, fields
from tests.unit.app.worker.registries import registry_map

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.app.worker import events
from taskq.app.worker.shutdown import install_signal_handlers
from taskq.app.worker.watchdog import task_dump
from taskq.domain.shutdown import ShutdownPhase


async def _innermost(secret: str) -> None:
    await asyncio.Event().wait()


async def _middle(secret: str) -> None:
    await _innermost(secret)


async def _outer(secret: str) -> None:
    await _middle(secret)


async def test_the_dump_follows_a_task_down_to_where_it_waits() -> None:
    """A task suspended three coroutines deep is dumped with every frame of its await
    chain, outermost first, down to the Event.wait it is parked in (not only its own
    frame), and with no argument value."""
    secret = "do-not-log-this-value"
    task = asyncio.create_task(_outer(secret), name="taskq-deep")
    await asyncio.sleep(0)
    try:
        [entry] = [e for e in task_dump() if e["name"] == "taskq-deep"]
        frames = entry["frames"]
        assert isinstance(frames, list)
        functions = [frame.rsplit(" in ", 1)[1] for frame in frames]
        assert functions == ["_outer", "_middle", "_innermost", "wait"]
        assert secret not in repr(entry)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.skipif(sys.platform == "win32", reason="no SIGUSR2 on Windows")
async def test_sigusr2_logs_the_dump_and_starts_no_shutdown(
    backend: MemoryBackend, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """With the worker's handlers installed, SIGUSR2 logs worker-task-dump at WARNING
    and the worker goes on (no shutdown phase, no exit)."""
    run = WorkerRun(backend, clock, registry_map)
    await run.start()
    remove = install_signal_handlers(run.worker.orchestrator)
    try:
        os.kill(os.getpid(), signal.SIGUSR2)
        for _ in range(100):
            if events_named(caplog, events.WORKER_TASK_DUMP):
                break
            await asyncio.sleep(0.01)
        [dump] = events_named(caplog, events.WORKER_TASK_DUMP)
        assert dump.levelname == "WARNING"
        assert fields(dump)["trigger"] == "SIGUSR2"
        names = {entry["name"] for entry in fields(dump)["tasks"]}
        assert "taskq-heartbeat" in names
        assert run.worker.orchestrator.phase is ShutdownPhase.NONE
        assert run.task is not None
        assert not run.task.done()
    finally:
        remove()
    assert await run.stop() == 0
