"""The runtime's watchdog and sibling contract, on a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, events_named, fields, job, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker import events
from taskq.app.worker.watchdog import ShutdownWatchdog, task_dump
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus
from taskq.domain.watchdog import Detector, Trip


def _recorder(trips: list[Trip]) -> Callable[[Trip], Awaitable[None]]:
    """An on_trip hook that only records the trip."""

    async def record(trip: Trip) -> None:
        trips.append(trip)

    return record


class Empty(BaseModel):
    pass


@actor
async def nothing(payload: Empty) -> None: ...


@actor
async def waits(payload: Empty) -> None:
    """Runs until its task is cancelled."""
    await asyncio.Event().wait()


@actor(retry=RetryPolicy(kind="non_retryable"))
async def waits_once(payload: Empty) -> None:
    """As ``waits``, non_retryable."""
    await asyncio.Event().wait()


REGISTRY = {"nothing": nothing, "waits": waits, "waits_once": waits_once}


async def test_a_sibling_that_returns_early_breaks_the_contract(
    backend: MemoryBackend, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A sibling returning with no shutdown in progress sets the shutdown event and raises."""
    run = WorkerRun(backend, clock, REGISTRY)

    async def returns_at_once() -> None:
        return None

    with pytest.raises(RuntimeError, match="returned while no shutdown"):
        await run.worker._guard("rogue", returns_at_once)
    assert run.state.shutdown_event.is_set()
    [record] = events_named(caplog, events.WORKER_SIBLING_RETURNED)
    assert fields(record) == {"loop": "rogue", "detector": "sibling_contract"}


async def test_a_sibling_returning_during_shutdown_is_fine(
    backend: MemoryBackend, clock: FakeClock
) -> None:
    """Once a shutdown is in progress a returning sibling is the contract, not a bug."""
    run = WorkerRun(backend, clock, REGISTRY)
    run.worker.request_shutdown()

    async def returns_at_once() -> None:
        return None

    await run.worker._guard("producer", returns_at_once)
    assert not run.state.shutdown_event.is_set()


async def test_a_crashing_sibling_is_counted_and_stops_the_worker(
    backend: MemoryBackend, clock: FakeClock
) -> None:
    """A sibling that raises sets the shutdown event and counts a sibling crash."""
    run = WorkerRun(backend, clock, REGISTRY)

    async def crashes() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await run.worker._guard("listener", crashes)
    assert run.state.shutdown_event.is_set()
    assert run.state.sibling_crashes == {"listener": 1}
    assert run.state.stopping.exit_code == 1


async def test_shutdown_deadline_trips_after_the_termination_grace(
    backend: MemoryBackend, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A shutdown still running termination_grace_period after the signal trips the watchdog."""
    run = WorkerRun(backend, clock, REGISTRY)
    settings = make_settings().watchdog
    trips: list[Trip] = []
    watchdog = ShutdownWatchdog(
        run.state,
        settings=settings,
        termination_grace_period=75.0,
        siblings=lambda: ["consumer-0"],
        on_trip=_recorder(trips),
    )
    task = asyncio.create_task(watchdog.run())
    run.state.stopping.started_at = clock.monotonic()
    await clock.advance_async(74)
    assert trips == []
    alive = events_named(caplog, events.WORKER_WATCHDOG_STILL_ALIVE)
    assert len(alive) == 7  # every dump_interval (10 s)
    assert fields(alive[0])["siblings"] == ["consumer-0"]
    await clock.advance_async(1)
    assert [t.detector for t in trips] == [Detector.SHUTDOWN_DEADLINE]
    assert task.done()


async def test_a_loop_that_stops_ticking_trips_the_stale_detector(
    backend: MemoryBackend, clock: FakeClock
) -> None:
    """A loop whose last tick is older than max(period × factor, floor) trips stale_loop."""
    run = WorkerRun(backend, clock, REGISTRY)
    trips: list[Trip] = []
    watchdog = ShutdownWatchdog(
        run.state,
        settings=make_settings().watchdog,
        termination_grace_period=75.0,
        siblings=list,
        on_trip=_recorder(trips),
    )
    run.state.liveness.tick("heartbeat", 10.0)  # allowance max(30, 30) = 30 s
    task = asyncio.create_task(watchdog.run())
    await clock.advance_async(30)
    assert trips == []
    await clock.advance_async(6)
    assert [t.detector for t in trips] == [Detector.STALE_LOOP]
    assert "heartbeat" in trips[0].reason
    await asyncio.gather(task)


async def test_while_the_store_fails_only_the_heartbeat_is_judged_stale(
    backend: MemoryBackend, clock: FakeClock
) -> None:
    """A producer stuck on a dead network since the cut (a silent partition) is not
    called stale once a beat or a claim has failed (``store_suspect``): the heartbeat
    isolates the worker (exit 1) instead of the watchdog ending it (exit 2). The
    heartbeat itself is still judged, and the producer's age still counts: once a beat
    works again, a producer still stuck trips at the next sweep."""
    run = WorkerRun(backend, clock, REGISTRY)
    trips: list[Trip] = []
    watchdog = ShutdownWatchdog(
        run.state,
        settings=make_settings().watchdog,
        termination_grace_period=75.0,
        siblings=list,
        on_trip=_recorder(trips),
    )
    run.state.liveness.tick("producer", 5.0)  # allowance max(15, 30) = 30 s
    run.state.liveness.tick("leader.election", 10.0)
    task = asyncio.create_task(watchdog.run())
    await clock.advance_async(15)  # the first failed beat: at most interval + timeout
    run.state.watch.store_suspect = True
    for _ in range(12):  # a minute of failing beats, the heartbeat ticking at each
        await clock.advance_async(5)
        run.state.liveness.tick("heartbeat", 10.0)
    assert trips == []
    run.state.watch.store_suspect = False  # a beat worked: the store answers again
    await clock.advance_async(6)
    assert [t.detector for t in trips] == [Detector.STALE_LOOP]
    assert "producer" in trips[0].reason
    assert "leader.election" in trips[0].reason
    assert "heartbeat" not in trips[0].reason
    await asyncio.gather(task)


async def test_a_stuck_heartbeat_is_stale_even_while_the_store_fails(
    backend: MemoryBackend, clock: FakeClock
) -> None:
    """The heartbeat's calls are bounded: a heartbeat loop that stops ticking is wedged
    whatever the store does, and still trips."""
    run = WorkerRun(backend, clock, REGISTRY)
    trips: list[Trip] = []
    watchdog = ShutdownWatchdog(
        run.state,
        settings=make_settings().watchdog,
        termination_grace_period=75.0,
        siblings=list,
        on_trip=_recorder(trips),
    )
    run.state.watch.store_suspect = True
    run.state.liveness.tick("heartbeat", 10.0)
    run.state.liveness.tick("producer", 5.0)
    task = asyncio.create_task(watchdog.run())
    await clock.advance_async(30)
    assert trips == []
    await clock.advance_async(6)
    assert [t.detector for t in trips] == [Detector.STALE_LOOP]
    assert trips[0].reason == "loops stopped ticking: heartbeat (35.0s)"
    await asyncio.gather(task)


async def test_soft_trip_ends_run_with_exit_code_2(
    backend: MemoryBackend, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """With hard_trip off a trip ends Worker.run with 2 after logging the task dump."""
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    await run.worker._on_trip(Trip(Detector.STALE_LOOP, "test"))
    assert await run.finish(within=1) == 2
    [trip] = events_named(caplog, events.WORKER_WATCHDOG_TRIP)
    assert fields(trip)["detector"] == "stale_loop"
    [dump] = events_named(caplog, events.WORKER_TASK_DUMP)
    assert isinstance(fields(dump)["tasks"], list)


async def test_a_trip_hands_back_the_jobs_it_held_before_the_worker_leaves(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A trip does not leave its running jobs to their leases (a crash would count their
    attempts): a retryable one waits again, attempt not counted (WatchdogTrip); a started
    non_retryable one ends crashed, never run twice."""
    retry_id = (await client.enqueue(waits.new_job({}, now=clock.now()))).job_id
    once_id = (await client.enqueue(waits_once.new_job({}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    await run.worker._on_trip(Trip(Detector.STALE_LOOP, "test"))
    assert await run.finish(within=1) == 2
    again = await job(client, retry_id)
    assert (again.status, again.attempt) == (JobStatus.SCHEDULED, 0)
    [interrupted] = await client.attempts(retry_id)
    assert (interrupted.outcome, interrupted.error_class) == ("interrupted", "WatchdogTrip")
    assert (await job(client, once_id)).status is JobStatus.CRASHED
    [handed] = events_named(caplog, events.WORKER_JOBS_HANDED_BACK)
    assert sorted(fields(handed)["jobs"]) == sorted([retry_id, once_id])


async def test_task_dump_names_tasks_and_await_sites() -> None:
    """The dump lists each task's name, coroutine and frames, never locals."""
    secret = "do-not-log"

    async def parked() -> None:
        await asyncio.Event().wait()

    task = asyncio.create_task(parked(), name="taskq-parked")
    await asyncio.sleep(0)
    dump = {entry["name"]: entry for entry in task_dump()}
    coroutine, frames = dump["taskq-parked"]["coroutine"], dump["taskq-parked"]["frames"]
    assert isinstance(coroutine, str)
    assert isinstance(frames, list)
    assert coroutine.endswith("parked")
    assert any("in parked" in frame for frame in frames)
    assert secret not in repr(dump)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
