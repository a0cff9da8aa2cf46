"""Graceful shutdown through the orchestrator (what SIGTERM triggers), on a fake clock."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, events_named, fields, job, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.context import JobContext
from taskq.app.worker import events
from taskq.app.worker.attempt_outcome import WORKER_SHUTDOWN
from taskq.app.worker.exit_guard import EXIT_GRACE
from taskq.app.worker.protocols import Registry
from taskq.app.worker.shutdown import install_signal_handlers
from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.retry import RetryPolicy
from taskq.domain.shutdown import ShutdownPhase
from taskq.domain.status import JobStatus


class Step(BaseModel):
    n: int


STARTED: list[int] = []
RELEASE = asyncio.Event()


@pytest.fixture(autouse=True)
def _reset() -> None:
    global RELEASE
    RELEASE = asyncio.Event()
    STARTED.clear()


@actor
async def polite(payload: Step, ctx: JobContext[Step]) -> int:
    STARTED.append(payload.n)
    await ctx.cancel_event.wait()
    return payload.n


@actor
async def deaf(payload: Step) -> None:
    STARTED.append(payload.n)
    await asyncio.Event().wait()


@actor
async def stuck(payload: Step) -> None:
    STARTED.append(payload.n)
    while not RELEASE.is_set():
        try:
            await RELEASE.wait()
        except asyncio.CancelledError:
            continue


@actor(retry=RetryPolicy(kind="non_retryable"))
async def stuck_once(payload: Step) -> None:
    await stuck.fn(payload)


@actor
async def quick(payload: Step) -> int:
    return payload.n


REGISTRY: Registry = {
    "polite": polite,
    "deaf": deaf,
    "stuck": stuck,
    "stuck_once": stuck_once,
    "quick": quick,
}


def phase(run: WorkerRun) -> ShutdownPhase:
    """The worker's shutdown phase now (a call, so a type checker does not carry an
    earlier assertion about it past an await)."""
    return run.worker.orchestrator.phase


async def test_idle_worker_stops_cleanly(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """With nothing in flight the shutdown drains, releases the leader and exits 0 at once."""
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    assert run.state.leadership.is_leader
    assert [w.worker_id for w in await client.list_workers()] == [run.worker.worker_id]
    run.worker.request_shutdown()
    await clock.run_until_idle()
    assert run.task is not None
    assert run.task.done()
    assert run.task.result() == 0
    assert run.worker.orchestrator.phase is ShutdownPhase.DONE
    assert backend.leader.holder is None
    assert await client.list_workers() == []


async def test_drain_repends_claimed_but_unstarted_jobs(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """DRAINING re-pends the local queue's jobs; a cooperative return is an interruption
    (waiting again, attempt not counted), exit 0."""
    ids = [
        (await client.enqueue(polite.new_job({"n": n}, now=clock.now()))).job_id for n in range(3)
    ]
    run = WorkerRun(backend, clock, REGISTRY, make_settings(max_concurrency=1))
    await run.start()
    running, queued, waiting = ids
    assert STARTED == [0]
    assert (await job(client, queued)).status is JobStatus.RUNNING  # claimed, in the local queue
    assert (await job(client, queued)).started_at is None
    assert (await job(client, waiting)).status is JobStatus.PENDING

    assert await run.stop() == 0
    for job_id in ids:
        stored = await job(client, job_id)
        assert stored.status is JobStatus.PENDING
        assert stored.attempt == 0
        assert stored.locked_by is None
    attempts = await client.attempts(running)
    assert [(a.outcome, a.error_class) for a in attempts] == [("interrupted", WORKER_SHUTDOWN)]
    assert await client.attempts(queued) == []
    phases = [fields(r)["phase"] for r in events_named(caplog, events.SHUTDOWN_PHASE)]
    assert phases == ["DRAINING", "DRAINED", "CANCELLING", "DONE"]
    # One line per job: the queued one given back unrun, the running one interrupted.
    [given] = events_named(caplog, events.JOB_HANDED_BACK)
    assert (fields(given)["job_id"], fields(given)["reason"]) == (queued, "drain")
    [interrupted] = events_named(caplog, events.JOB_INTERRUPTED)
    assert fields(interrupted)["job_id"] == running


async def test_forcing_interrupts_tasks_that_ignore_the_event(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After the cancellation grace FORCING cancels the task, writes no cancel phase, and the
    retryable job waits again as the same attempt (interrupted, never cancelled)."""
    settings = make_settings(cancellation_grace_period=20.0, cleanup_grace_period=10.0)
    job_id = (await client.enqueue(deaf.new_job({"n": 1}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, settings)
    await run.start()
    run.worker.request_shutdown()
    await run.advance(19)
    assert run.worker.orchestrator.phase is ShutdownPhase.CANCELLING
    assert (await job(client, job_id)).status is JobStatus.RUNNING
    await run.advance(1)
    assert await run.finish(within=5) == 0
    stored = await job(client, job_id)
    assert (stored.status, stored.attempt, stored.cancel_phase) == (
        JobStatus.PENDING,
        0,
        CancelPhase.NONE,
    )
    [attempt] = await client.attempts(job_id)
    assert (attempt.outcome, attempt.error_class) == ("interrupted", WORKER_SHUTDOWN)
    assert attempt.error is not None
    assert "task was cancelled" in attempt.error
    # One INFO line names the job (a deploy's interruption is routine, not an alert).
    [line] = events_named(caplog, events.JOB_INTERRUPTED)
    assert line.levelno == logging.INFO
    got = fields(line)
    assert (got["job_id"], got["actor"], got["attempt"]) == (job_id, "deaf", 1)
    assert "task was cancelled" in got["reason"]


async def test_abandoning_hands_back_jobs_that_never_stop(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A retryable job surviving both graces waits again (attempt not counted), due only
    once the old process has surely ended; the worker still exits 0."""
    settings = make_settings(
        cancellation_grace_period=20.0, cleanup_grace_period=10.0, termination_grace_period=75.0
    )
    job_id = (await client.enqueue(stuck.new_job({"n": 1}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, settings)
    await run.start()
    signalled = clock.now()
    run.worker.request_shutdown()
    await run.advance(29)
    assert phase(run) is ShutdownPhase.FORCING
    assert await run.finish(within=5) == 0
    assert phase(run) is ShutdownPhase.DONE
    stored = await job(client, job_id)
    assert (stored.status, stored.attempt) == (JobStatus.SCHEDULED, 0)
    # The termination deadline, plus the exit guard's grace: the old code is gone by then.
    assert stored.scheduled_at == signalled + timedelta(seconds=75 + EXIT_GRACE)
    assert [a.outcome for a in await client.attempts(job_id)] == ["interrupted"]
    RELEASE.set()
    await clock.run_until_idle()


async def test_abandoning_a_non_retryable_job_abandons_it(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A non_retryable job surviving both graces ends abandoned: it never runs twice."""
    settings = make_settings(cancellation_grace_period=20.0, cleanup_grace_period=10.0)
    job_id = (await client.enqueue(stuck_once.new_job({"n": 1}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, settings)
    await run.start()
    run.worker.request_shutdown()
    await run.advance(29)
    assert await run.finish(within=5) == 0
    stored = await job(client, job_id)
    assert (stored.status, stored.attempt) == (JobStatus.ABANDONED, 1)
    assert [a.outcome for a in await client.attempts(job_id)] == ["interrupted"]
    RELEASE.set()
    await clock.run_until_idle()


async def test_second_signal_skips_the_cooperative_wait(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A second SIGTERM during CANCELLING goes straight to FORCING; the job is interrupted
    (waiting again), not cancelled."""
    job_id = (await client.enqueue(deaf.new_job({"n": 1}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    run.worker.request_shutdown()
    await clock.run_until_idle()
    assert run.worker.orchestrator.phase is ShutdownPhase.CANCELLING
    run.worker.request_shutdown("SIGINT")
    assert await run.finish(within=2) == 0
    assert (await job(client, job_id)).status is JobStatus.PENDING


async def test_third_signal_exits_hard(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """The third signal hands the running job back (waiting again, attempt not counted)
    and then calls the hard-exit hook with code 1."""
    job_id = (await client.enqueue(stuck.new_job({"n": 1}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    for _ in range(3):
        run.worker.request_shutdown()
        await clock.run_until_idle()
    assert run.hard_exits == [1]
    stored = await job(client, job_id)
    assert (stored.status, stored.attempt) == (JobStatus.SCHEDULED, 0)
    [attempt] = await client.attempts(job_id)
    assert (attempt.outcome, attempt.error_class) == ("interrupted", WORKER_SHUTDOWN)
    RELEASE.set()


async def test_sigterm_is_routed_to_the_orchestrator(
    backend: MemoryBackend, clock: FakeClock
) -> None:
    """install_signal_handlers makes SIGTERM start the graceful shutdown."""
    import os
    import signal

    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    remove = install_signal_handlers(run.worker.orchestrator)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        await run.finish(within=5)
    finally:
        remove()
    assert run.worker.orchestrator.phase is ShutdownPhase.DONE


async def test_jobs_keep_running_to_completion_while_draining(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A job that finishes within the cancellation grace is written as it ended."""
    job_id = (await client.enqueue(quick.new_job({"n": 4}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    await run.stop()
    assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert (await job(client, job_id)).result == 4


async def test_scheduled_jobs_are_not_touched_by_the_drain(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Shutdown leaves scheduled work alone."""
    at = clock.now() + timedelta(hours=1)
    job_id = (
        await client.enqueue(quick.new_job({"n": 1}, scheduled_at=at, now=clock.now()))
    ).job_id
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    assert await run.stop() == 0
    assert (await job(client, job_id)).status is JobStatus.SCHEDULED


@actor
async def unaware(payload: Step) -> int:
    """Never looks at ctx.cancel_event; finishes when RELEASE is set."""
    STARTED.append(payload.n)
    await RELEASE.wait()
    return payload.n * 100


async def test_a_job_finishing_during_the_cancel_wait_is_recorded_as_it_ended(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A job that completes within the cancellation grace without looking succeeds once."""
    job_id = (await client.enqueue(unaware.new_job({"n": 2}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"unaware": unaware})
    await run.start()
    run.worker.request_shutdown()
    await run.advance(5)
    assert run.worker.orchestrator.phase is ShutdownPhase.CANCELLING
    RELEASE.set()
    assert await run.finish(within=2) == 0
    done = await job(client, job_id)
    assert done.status is JobStatus.SUCCEEDED
    assert done.result == 200
    assert STARTED == [2]
