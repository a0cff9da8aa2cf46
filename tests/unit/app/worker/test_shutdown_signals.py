"""What the shutdown-signal and shutdown-phase records say about each signal."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import (
    StoreProxy,
    WorkerRun,
    events_named,
    fields,
    make_settings,
)

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker import events
from taskq.app.worker.protocols import Registry
from taskq.domain.shutdown import ShutdownPhase


class Step(BaseModel):
    n: int


@actor
async def deaf(payload: Step) -> None:
    """Ignores its cancel event; a task cancel ends it."""
    await asyncio.Event().wait()


RELEASE = asyncio.Event()


@pytest.fixture(autouse=True)
def _release() -> None:
    global RELEASE
    RELEASE = asyncio.Event()


@actor
async def stubborn(payload: Step) -> None:
    """Swallows every cancellation until the test sets RELEASE."""
    while not RELEASE.is_set():
        try:
            await RELEASE.wait()
        except asyncio.CancelledError:
            continue


REGISTRY: Registry = {"deaf": deaf, "stubborn": stubborn}
SETTINGS = {"cancellation_grace_period": 20.0, "cleanup_grace_period": 10.0}


def signal_records(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [fields(r) for r in events_named(caplog, events.SHUTDOWN_SIGNAL)]


def phase_records(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [fields(r) for r in events_named(caplog, events.SHUTDOWN_PHASE)]


async def started_worker(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore, ref: Any, **kw: Any
) -> WorkerRun:
    await client.enqueue(ref.new_job({"n": 1}, now=clock.now()))
    run = WorkerRun(backend, clock, REGISTRY, make_settings(**SETTINGS), **kw)
    await run.start()
    return run


async def test_a_second_sigint_while_cancelling_says_it_forces(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first SIGINT's record says the shutdown started; a second one during
    CANCELLING says it skipped the cooperative wait (FORCING), with its number, and the
    FORCING phase record names the second signal as its cause."""
    run = await started_worker(backend, clock, client, deaf)
    run.worker.request_shutdown("SIGINT")
    await clock.run_until_idle()
    assert run.worker.orchestrator.phase is ShutdownPhase.CANCELLING
    run.worker.request_shutdown("SIGINT")
    await clock.run_until_idle()
    first, second = signal_records(caplog)
    assert first["signum"] == signal.SIGINT == second["signum"]
    assert (first["count"], first["action"], first["phase"]) == (1, "start", "DRAINING")
    assert (second["count"], second["action"]) == (2, "forcing")
    assert (second["applied_during"], second["phase"]) == ("CANCELLING", "FORCING")
    assert "FORCING now" in second["effect"]
    forcing = [p for p in phase_records(caplog) if p["phase"] == "FORCING"]
    assert [(p["previous"], p["cause"]) for p in forcing] == [("CANCELLING", "second signal")]
    assert await run.finish(within=5) == 0


async def test_a_second_sigterm_while_forcing_says_it_only_counts(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """In FORCING a second SIGTERM changes nothing but the count, and its record says so;
    the phase record of FORCING names the cancellation grace as its cause; the third
    signal's record says the worker exits at once."""
    run = await started_worker(backend, clock, client, stubborn)
    run.worker.request_shutdown()
    await run.advance(20)
    assert run.worker.orchestrator.phase is ShutdownPhase.FORCING
    run.worker.request_shutdown()
    await clock.run_until_idle()
    assert run.worker.orchestrator.phase is ShutdownPhase.FORCING
    run.worker.request_shutdown()
    await clock.run_until_idle()
    _, second, third = signal_records(caplog)
    assert second["signum"] == signal.SIGTERM
    assert (second["count"], second["action"], second["phase"]) == (2, "counted", "FORCING")
    assert "counted only" in second["effect"]
    assert "third signal exits at once" in second["effect"]
    assert (third["count"], third["action"]) == (3, "hard-exit")
    assert "exits at once with code 1" in third["effect"]
    assert run.hard_exits == [1]
    forcing = [p for p in phase_records(caplog) if p["phase"] == "FORCING"]
    assert [p["cause"] for p in forcing] == ["cancellation grace elapsed"]
    RELEASE.set()
    await clock.run_until_idle()


class SlowDrain(StoreProxy):
    """The memory store, with a drain that waits until the test lets it finish."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.draining = asyncio.Event()
        self.release = asyncio.Event()

    async def drain_unstarted(self, worker_id: str, **kw: Any) -> int:
        self.draining.set()
        await self.release.wait()
        return int(await self._inner.drain_unstarted(worker_id, **kw))


async def test_a_second_signal_during_the_drain_says_it_was_applied_after_it(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A second SIGINT that arrives while the drain runs is applied once it finished:
    its record says it arrived during the drain and moved the shutdown to FORCING."""
    store = SlowDrain(backend.store())
    run = await started_worker(backend, clock, client, deaf, store=store)
    run.worker.request_shutdown("SIGINT")
    await asyncio.wait_for(store.draining.wait(), 5)
    run.worker.request_shutdown("SIGINT")
    await clock.run_until_idle()
    assert len(signal_records(caplog)) == 1  # the second waits for the drain
    store.release.set()
    await clock.run_until_idle()
    second = signal_records(caplog)[1]
    assert (second["received_during"], second["applied_during"]) == ("DRAINING", "CANCELLING")
    assert (second["action"], second["phase"]) == ("forcing", "FORCING")
    assert "arrived while the drain ran" in second["effect"]
    assert await run.finish(within=5) == 0


async def test_a_signal_that_comes_after_the_shutdown_ended_says_it_was_ignored(
    backend: MemoryBackend,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two quick SIGINTs to an idle worker: the first ends the shutdown at its drain (no
    job in flight), and the second's record says it was ignored, not that it forced."""
    run = WorkerRun(backend, clock, REGISTRY, make_settings(**SETTINGS))
    await run.start()
    run.worker.request_shutdown("SIGINT")
    run.worker.request_shutdown("SIGINT")
    assert await run.finish(within=5) == 0
    first, second = signal_records(caplog)
    assert (first["action"], second["action"]) == ("start", "ignored")
    assert second["applied_during"] == "DONE"
    assert "ended" in second["effect"]
    done = [p for p in phase_records(caplog) if p["phase"] == "DONE"]
    assert [p["cause"] for p in done] == ["drain finished with no job in flight"]
