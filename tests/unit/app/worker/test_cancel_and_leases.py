"""Heartbeat on a fake clock: leases extended, lost leases, the three-phase cancel, isolate."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import (
    StoreProxy,
    WorkerRun,
    events_named,
    fields,
    job,
    make_settings,
)

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.context import JobContext
from taskq.app.worker import events
from taskq.app.worker.protocols import Registry
from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.status import JobStatus


class Task(BaseModel):
    name: str


RELEASE = asyncio.Event()
SEEN_CANCEL: list[bool] = []
#: The attempt numbers ``deaf`` started with.
RUNS: list[int] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    global RELEASE
    RELEASE = asyncio.Event()
    SEEN_CANCEL.clear()
    RUNS.clear()


@actor
async def blocker(payload: Task) -> str:
    await RELEASE.wait()
    return "done"


@actor
async def cooperative(payload: Task, ctx: JobContext[Task]) -> str:
    await ctx.cancel_event.wait()
    SEEN_CANCEL.append(ctx.cancelled)
    return "stopped early"


@actor
async def deaf(payload: Task, ctx: JobContext[Task]) -> None:
    """Ignores the cancel event; only a task cancel stops it."""
    RUNS.append(ctx.attempt)
    await asyncio.Event().wait()


@actor
async def stuck(payload: Task, ctx: JobContext[Task]) -> None:
    """Ignores the cancel event and swallows task cancellation until RELEASE."""
    while not RELEASE.is_set():
        try:
            await RELEASE.wait()
        except asyncio.CancelledError:
            SEEN_CANCEL.append(True)


class SickHeartbeat(StoreProxy):
    """A store whose heartbeat call fails (an exhausted heartbeat pool); the rest works."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)

    async def heartbeat(self, beat: object) -> None:
        raise ConnectionResetError("heartbeat pool exhausted")


@actor
async def raiser(payload: Task, ctx: JobContext[Task]) -> None:
    await ctx.cancel_event.wait()
    raise RuntimeError("stopping because asked to")


REGISTRY: Registry = {
    "raiser": raiser,
    "blocker": blocker,
    "cooperative": cooperative,
    "deaf": deaf,
    "stuck": stuck,
}


async def test_heartbeat_keeps_extending_the_lease(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A job running far longer than lock_lease keeps its lease and is never reclaimed."""
    job_id = (await client.enqueue(blocker.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    first = await job(client, job_id)
    assert first.lock_expires_at == clock.now() + timedelta(seconds=60)
    await run.advance(10)
    assert (await job(client, job_id)).lock_expires_at == clock.now() + timedelta(seconds=60)
    await run.advance(300)
    still = await job(client, job_id)
    assert still.status is JobStatus.RUNNING
    assert still.fencing_token == first.fencing_token
    assert still.lock_expires_at is not None
    assert still.lock_expires_at > clock.now()
    RELEASE.set()
    await clock.run_until_idle()
    assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert await run.stop() == 0


async def test_write_after_a_lost_lease_is_logged_not_retried(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A job reclaimed under a worker: its completion is refused and logged as job-lease-lost."""
    job_id = (await client.enqueue(blocker.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"blocker": blocker})
    await run.start()
    # The lease runs out (e.g. the worker was partitioned) and the sweep re-pends the job.
    backend.jobs[job_id].lock_expires_at = clock.now() - timedelta(seconds=1)
    report = await client.reclaim_expired()
    assert report.repended == (job_id,)
    run.state.producer_stop.set()  # keep this worker from claiming it again
    RELEASE.set()
    await clock.run_until_idle()
    after = await job(client, job_id)
    assert after.status is JobStatus.PENDING
    assert after.result is None
    [lost] = events_named(caplog, events.JOB_LEASE_LOST)
    assert lost.levelno == logging.WARNING
    assert fields(lost)["job_id"] == job_id
    assert fields(lost)["write"] == "Complete"
    await run.stop()


async def test_cooperative_cancel_ends_the_job_cancelled(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A cancel request reaches ctx.cancel_event at the next heartbeat; a return means cancelled."""
    job_id = (await client.enqueue(cooperative.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    assert await client.request_cancel(job_id) is JobStatus.RUNNING
    await run.advance(9)
    assert SEEN_CANCEL == []
    await run.advance(1)
    assert SEEN_CANCEL == [True]
    cancelled = await job(client, job_id)
    assert cancelled.status is JobStatus.CANCELLED
    assert cancelled.cancel_phase is CancelPhase.COOPERATIVE
    assert await run.stop() == 0


async def test_cancel_escalates_from_event_to_forced_to_abandoned(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Cancel timeline: event at the next beat, FORCED + task.cancel() after the
    cancellation grace, abandoned after the cleanup grace."""
    settings = make_settings(cancellation_grace_period=20.0, cleanup_grace_period=10.0)
    job_id = (await client.enqueue(stuck.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, settings)
    await run.start()
    await client.request_cancel(job_id)

    await run.advance(10)  # beat 1: cooperative phase observed
    assert len(events_named(caplog, events.JOB_CANCEL_REQUESTED)) == 1
    assert SEEN_CANCEL == []
    assert (await job(client, job_id)).cancel_phase is CancelPhase.COOPERATIVE

    await run.advance(10)  # beat 2: 10 s into the 20 s grace
    assert (await job(client, job_id)).cancel_phase is CancelPhase.COOPERATIVE
    await run.advance(10)  # beat 3: grace over → persisted FORCED, task cancelled
    assert (await job(client, job_id)).cancel_phase is CancelPhase.FORCED
    assert SEEN_CANCEL == [True]
    assert (await job(client, job_id)).status is JobStatus.RUNNING

    await run.advance(10)  # beat 4: cleanup grace over → abandoned
    abandoned = await job(client, job_id)
    assert abandoned.status is JobStatus.ABANDONED
    assert len(events_named(caplog, events.JOB_ABANDONED)) == 1

    RELEASE.set()  # the stuck actor finally gives up; nothing more is written
    await clock.run_until_idle()
    assert (await job(client, job_id)).status is JobStatus.ABANDONED
    assert events_named(caplog, events.JOB_LEASE_LOST) == []
    assert await run.stop() == 0


async def test_an_abandoned_cancel_frees_its_slot_for_the_next_job(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """One slot: a cancelled job that swallows its task's cancellation is abandoned after
    both graces, and its consumer stops waiting for it: the next job runs at once (its
    slot was held for good before), and the worker stops cleanly."""
    settings = make_settings(
        max_concurrency=1, cancellation_grace_period=20.0, cleanup_grace_period=10.0
    )
    stuck_id = (await client.enqueue(stuck.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, settings)
    await run.start()
    await client.request_cancel(stuck_id)
    await run.advance(40)  # event, forced, then abandoned (see the timeline test above)
    assert (await job(client, stuck_id)).status is JobStatus.ABANDONED
    next_id = (await client.enqueue(cooperative.new_job({"name": "y"}, now=clock.now()))).job_id
    await run.advance(1)
    assert (await job(client, next_id)).status is JobStatus.RUNNING
    assert (await job(client, next_id)).started_at is not None
    await client.request_cancel(next_id)
    await run.advance(10)
    assert (await job(client, next_id)).status is JobStatus.CANCELLED
    assert SEEN_CANCEL[-1] is True
    assert await run.stop() == 0
    RELEASE.set()
    await clock.run_until_idle()


async def test_a_job_is_not_run_twice_here_after_its_lease_was_taken_back(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pause past the lease: the leader re-pends the running job and this worker claims it
    again while the old attempt (asked to stop, deaf to it) still runs here. The claim is
    given back for the cancellation grace instead of a second copy running alongside (which
    also mixed up the in-flight count, so the next stop never finished)."""
    settings = make_settings(cancellation_grace_period=5.0, cleanup_grace_period=1.0)
    job_id = (await client.enqueue(deaf.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, settings)
    await run.start()
    await run.advance(2)
    assert RUNS == [1]
    clock.advance(600)  # one synchronous step: the process was paused past its lease
    await clock.run_until_idle()
    await run.advance(2)
    assert RUNS == [1]  # no second copy while the first still runs here
    [held] = events_named(caplog, events.JOB_STILL_RUNNING_HERE)
    assert fields(held)["job_id"] == job_id
    assert await run.stop(within=30) == 0


async def test_forced_cancel_of_a_task_that_stops_ends_cancelled(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """An actor deaf to the event but not to task.cancel() ends cancelled after the grace."""
    settings = make_settings(cancellation_grace_period=20.0, cleanup_grace_period=10.0)
    job_id = (await client.enqueue(deaf.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, settings)
    await run.start()
    await client.request_cancel(job_id)
    await run.advance(30)
    cancelled = await job(client, job_id)
    assert cancelled.status is JobStatus.CANCELLED
    assert cancelled.cancel_phase is CancelPhase.FORCED
    assert await run.stop() == 0


async def test_failing_heartbeats_isolate_the_worker(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """More than max_heartbeat_failures failed beats: isolate-self, shutdown, exit 1."""
    await client.enqueue(blocker.new_job({"name": "x"}, now=clock.now()))
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    run.store.set_reachable(False)
    await run.advance(30)
    assert run.task is not None
    assert not run.task.done()
    failed = events_named(caplog, events.HEARTBEAT_FAILED)
    assert len(failed) >= 3
    assert all(fields(record)["error"] for record in failed)  # the reason, not just a count
    code = await run.finish(within=30)
    assert code == 1
    [isolated] = events_named(caplog, events.WORKER_ISOLATED)
    assert fields(isolated)["consecutive_failures"] == 4
    # The hand-back could not land either: each job it held is named, left to its lease.
    [left] = events_named(caplog, events.JOB_LEFT_TO_LEASE)
    assert (fields(left)["actor"], fields(left)["attempt"]) == ("blocker", 1)


async def test_isolate_hands_running_jobs_back(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """When the isolate write lands, the worker's running jobs go back to wait 5 s."""
    job_id = (await client.enqueue(blocker.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(
        backend,
        clock,
        REGISTRY,
        make_settings(max_heartbeat_failures=1),
        store=SickHeartbeat(backend.store()),
    )
    await run.start()
    await run.advance(20)
    assert await run.finish(within=10) == 1
    handed_back = await job(client, job_id)
    assert handed_back.status is JobStatus.SCHEDULED
    attempts = await client.attempts(job_id)
    assert attempts[-1].error_class == "HeartbeatLost"
    [line] = events_named(caplog, events.JOB_HANDED_BACK)  # one line naming the job
    assert fields(line)["job_id"] == job_id
    assert (fields(line)["actor"], fields(line)["reason"]) == ("blocker", "HeartbeatLost")


async def test_a_job_that_finishes_without_looking_at_the_cancel_succeeds(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Cancel requested, but the actor completes without reading it: the success is kept."""
    job_id = (await client.enqueue(blocker.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    await client.request_cancel(job_id)
    await run.advance(10)  # the event is set now; the actor never reads it
    RELEASE.set()
    await clock.run_until_idle()
    done = await job(client, job_id)
    assert done.status is JobStatus.SUCCEEDED
    assert done.result == "done"
    assert await run.stop() == 0


async def test_an_error_raised_after_a_cancel_request_ends_cancelled(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """An actor that raises once cancelled is recorded cancelled, not retried."""
    job_id = (await client.enqueue(raiser.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    await client.request_cancel(job_id)
    await run.advance(10)
    stopped = await job(client, job_id)
    assert stopped.status is JobStatus.CANCELLED
    assert stopped.attempt == 1
    assert await run.stop() == 0


async def test_a_heartbeat_that_never_answers_says_why(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A store waiting for a pool connection that never frees: heartbeat-failed said
    only 'consecutive_failures: 1'; it now names the timeout and its likely causes."""
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()

    async def never(*_: object, **__: object) -> None:
        await asyncio.Event().wait()

    run.store.heartbeat = never  # type: ignore[method-assign,assignment]
    await run.advance(25)
    failed = events_named(caplog, events.HEARTBEAT_FAILED)
    assert failed
    assert "TASKQ_HEARTBEAT_COMMAND_TIMEOUT" in fields(failed[0])["error"]
    await run.stop()
