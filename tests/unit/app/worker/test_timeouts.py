"""Attempt timeouts and running deadlines on the memory adapter with a fake clock: the cancel
protocol at the bound (event, forced cancel, given up on), the error class recorded, and the
retry policy deciding what follows."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, events_named, fields, job, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.client import JobsClient
from taskq.app.context import JobContext
from taskq.app.worker import events
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus

ONCE = RetryPolicy(max_attempts=1)
#: Retried after exactly 1 s (no jitter), up to three attempts.
THRICE = RetryPolicy(max_attempts=3, backoff="fixed", base=timedelta(seconds=1), jitter=0.0)


class Work(BaseModel):
    n: int = 0


#: What the actors saw, in order (cleared per test).
SEEN: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    SEEN.clear()


class ShortHolds(FakeClock):
    """A fake clock whose holds (a sync actor's thread at work) last 50 ms of real time at
    most, so a thread that never returns keeps fake time still only briefly."""

    def hold(self, limit: float = 0.05) -> Callable[[], None]:
        return super().hold(limit)


@actor(timeout=timedelta(seconds=5), retry=ONCE)
async def cooperative(payload: Work, ctx: JobContext[Work]) -> str:
    await ctx.cancel_event.wait()
    SEEN.append("told")
    return "stopped early"


@actor(timeout=timedelta(seconds=5), retry=ONCE)
async def deaf(payload: Work) -> None:
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        SEEN.append("cancelled")
        raise


@actor(timeout=timedelta(seconds=60), retry=ONCE)
async def patient(payload: Work, ctx: JobContext[Work]) -> str:
    await ctx.cancel_event.wait()
    return "stopped"


@actor(retry=ONCE)
async def unbounded(payload: Work, ctx: JobContext[Work]) -> str:
    await ctx.cancel_event.wait()
    return "stopped"


@actor(timeout=timedelta(seconds=5), retry=THRICE)
async def slow_once(payload: Work, ctx: JobContext[Work]) -> int:
    """Runs past its timeout on attempt 1 (stopping when told); quick afterwards."""
    if ctx.attempt == 1:
        await ctx.cancel_event.wait()
    return ctx.attempt


@actor(timeout=timedelta(seconds=5), retry=RetryPolicy(kind="non_retryable"))
async def fragile(payload: Work, ctx: JobContext[Work]) -> None:
    await ctx.cancel_event.wait()


@actor(timeout=timedelta(seconds=30), retry=ONCE)
async def deaf_for_long(payload: Work) -> None:
    await asyncio.Event().wait()


HUNG = threading.Event()


@actor(timeout=timedelta(seconds=2), retry=ONCE)
def hung(payload: Work) -> None:
    """A sync actor that never polls ctx.cancelled: only HUNG lets its thread return."""
    HUNG.wait(30)


@actor(retry=ONCE)
def quick(payload: Work) -> int:
    return payload.n


async def _start(
    clock: FakeClock, refs: list[Any], **settings: Any
) -> tuple[WorkerRun, JobsClient, MemoryQueueStore]:
    backend = MemoryBackend(clock=clock)
    store = backend.store()
    run = WorkerRun(
        backend,
        clock,
        {ref.name: ref for ref in refs},
        make_settings(
            **{"cancellation_grace_period": 30.0, "cleanup_grace_period": 10.0} | settings
        ),
    )
    await run.start()
    return run, JobsClient(store, clock=clock), store


async def test_a_cooperative_actor_is_told_at_its_timeout_and_the_attempt_fails(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """At the actor's timeout its cancel_event is set; it returns, and the attempt fails with
    AttemptTimeout (no retry left: the job fails)."""
    run, client, store = await _start(clock, [cooperative])
    handle = await client.enqueue(cooperative, Work())
    await run.advance(4.9)
    assert (SEEN, (await job(store, handle.job_id)).status) == ([], JobStatus.RUNNING)
    await run.advance(0.1)
    failed = await job(store, handle.job_id)
    assert (SEEN, failed.status) == (["told"], JobStatus.FAILED)
    [attempt] = await store.attempts(handle.job_id)
    assert (attempt.outcome, attempt.error_class) == ("failed", "AttemptTimeout")
    assert attempt.error is not None
    assert "ran past its timeout of 0:00:05: the actor stopped when its cancel_event" in (
        attempt.error
    )
    [told] = events_named(caplog, events.JOB_TIMED_OUT)
    assert (told.levelno, fields(told)["job_id"]) == (logging.WARNING, handle.job_id)
    assert await run.stop() == 0


async def test_an_actor_that_ignores_the_event_is_cancelled_after_the_capped_grace(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """An actor deaf to its cancel_event has its task cancelled one grace later (the worker's
    30 s, capped at the 5 s timeout), and the attempt fails with AttemptTimeout."""
    run, client, store = await _start(clock, [deaf])
    handle = await client.enqueue(deaf, Work())
    await run.advance(9.9)
    assert (SEEN, (await job(store, handle.job_id)).status) == ([], JobStatus.RUNNING)
    await run.advance(0.1)
    assert SEEN == ["cancelled"]
    failed = await job(store, handle.job_id)
    assert failed.status is JobStatus.FAILED
    assert failed.last_error is not None
    assert "5 s after its cancel_event was set; its task was cancelled" in failed.last_error
    [attempt] = await store.attempts(handle.job_id)
    assert attempt.error_class == "AttemptTimeout"
    assert len(events_named(caplog, events.JOB_TIMEOUT_FORCED)) == 1
    assert await run.stop() == 0


async def test_a_sync_actor_is_given_up_on_after_the_cleanup_grace_and_its_thread_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sync actor that never polls ctx.cancelled is waited for through both graces (its
    thread cannot be cancelled), then given up on: the attempt fails with AttemptTimeout,
    and with max_concurrency 1 the next sync job runs in a new thread meanwhile."""
    HUNG.clear()
    clock = ShortHolds()
    run, client, store = await _start(clock, [hung, quick], max_concurrency=1)
    try:
        stuck = await client.enqueue(hung, Work())
        await run.advance(5.9)  # told at 2 s, 2 s graces (capped at the timeout)
        assert (await job(store, stuck.job_id)).status is JobStatus.RUNNING
        assert events_named(caplog, events.JOB_TIMEOUT_FORCED) != []
        await run.advance(0.1)
        failed = await job(store, stuck.job_id)
        assert failed.status is JobStatus.FAILED
        assert failed.last_error is not None
        assert "the worker stopped waiting for it" in failed.last_error
        [abandoned] = events_named(caplog, events.JOB_TIMEOUT_ABANDONED)
        assert abandoned.levelno == logging.ERROR
        after = await client.enqueue(quick, Work(n=7))
        await run.advance(1)
        assert (await after.get()).result == 7
    finally:
        HUNG.set()
    assert await run.stop() == 0


async def test_the_retry_policy_decides_after_a_timeout(clock: FakeClock) -> None:
    """A timed-out attempt of a retryable job is retried after its backoff (the attempt kept
    in the history as AttemptTimeout) and the next attempt succeeds; a non_retryable job
    fails at once."""
    run, client, store = await _start(clock, [slow_once, fragile])
    retried = await client.enqueue(slow_once, Work())
    once = await client.enqueue(fragile, Work())
    await run.advance(5)
    waiting = await job(store, retried.job_id)
    assert waiting.status in (JobStatus.PENDING, JobStatus.SCHEDULED)
    assert waiting.scheduled_at == clock.now() + timedelta(seconds=1)
    assert (await job(store, once.job_id)).status is JobStatus.FAILED
    await run.advance(2)
    assert (await retried.get()).result == 2
    history = await store.attempts(retried.job_id)
    assert [(a.outcome, a.error_class) for a in history] == [
        ("retried", "AttemptTimeout"),
        ("succeeded", None),
    ]
    assert await run.stop() == 0


async def test_a_running_job_is_stopped_at_its_deadline(clock: FakeClock) -> None:
    """schedule_to_close bounds a running attempt too: at the deadline the actor is told to
    stop, and the job fails with DeadlineExceeded."""
    run, client, store = await _start(clock, [unbounded])
    handle = await client.enqueue(
        unbounded, Work(), schedule_to_close=clock.now() + timedelta(seconds=10)
    )
    await run.advance(9.9)
    assert (await job(store, handle.job_id)).status is JobStatus.RUNNING
    await run.advance(0.1)
    failed = await job(store, handle.job_id)
    assert failed.status is JobStatus.FAILED
    [attempt] = await store.attempts(handle.job_id)
    assert attempt.error_class == "DeadlineExceeded"
    assert attempt.error is not None
    assert "its job's deadline" in attempt.error
    assert await run.stop() == 0


async def test_an_enqueues_timeout_overrides_the_actors(clock: FakeClock) -> None:
    """A timeout given at enqueue bounds the attempt instead of the actor's 60 s, shorter
    (stopped at 3 s) or longer (still running at 60 s, stopped at 90 s)."""
    run, client, store = await _start(clock, [patient], max_concurrency=2)
    shorter = await client.enqueue(patient, Work(), timeout=timedelta(seconds=3))
    longer = await client.enqueue(patient, Work(n=1), timeout=timedelta(seconds=90))
    await run.advance(3)
    assert (await job(store, shorter.job_id)).status is JobStatus.FAILED
    await run.advance(57)
    assert (await job(store, longer.job_id)).status is JobStatus.RUNNING
    await run.advance(30)
    assert (await job(store, longer.job_id)).status is JobStatus.FAILED
    assert [a.error_class for a in await store.attempts(longer.job_id)] == ["AttemptTimeout"]
    assert await run.stop() == 0


async def test_a_users_cancel_that_came_first_keeps_its_meaning(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A cancel delivered before the timeout is reached ends the job cancelled, by the
    cancel's own escalation; the timeout does nothing to it."""
    run, client, store = await _start(clock, [deaf_for_long])
    handle = await client.enqueue(deaf_for_long, Work())
    await run.advance(1)
    assert (await job(store, handle.job_id)).status is JobStatus.RUNNING
    await handle.cancel()
    await run.advance(9)  # the heartbeat (at 10 s) delivers the cancel: the event is set
    await run.advance(30)  # the timeout (at 31 s) passes: nothing of its own
    assert events_named(caplog, events.JOB_TIMED_OUT) == []
    await run.advance(1)  # the cancel's grace (30 s from its delivery) ended: task cancelled
    assert (await job(store, handle.job_id)).status is JobStatus.CANCELLED
    assert await run.stop() == 0
