"""Dispatch on the memory adapter with a fake clock: outcomes, retries, capacity, timing."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from datetime import timedelta

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import (
    WorkerRun,
    claim_one,
    events_named,
    fields,
    job,
    make_settings,
    open_dispatcher,
)

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryNotifier, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.context import JobContext
from taskq.app.worker import events
from taskq.app.worker.protocols import Registry
from taskq.domain.job import NewJob
from taskq.domain.outcomes import RetryAfter, Snooze
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus


class Item(BaseModel):
    n: int


RUNS: Counter[int] = Counter()


@actor
async def record(payload: Item) -> int:
    RUNS[payload.n] += 1
    return payload.n * 10


@pytest.fixture(autouse=True)
def _reset_runs() -> None:
    RUNS.clear()


async def test_every_job_runs_exactly_once(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Many jobs through a few consumers: each succeeds once, with its result stored."""
    ids = [
        (await client.enqueue(record.new_job({"n": n}, now=clock.now()))).job_id for n in range(25)
    ]
    run = WorkerRun(backend, clock, {"record": record}, make_settings(max_concurrency=3))
    await run.start()
    await run.advance(1)
    for n, job_id in enumerate(ids):
        stored = await job(client, job_id)
        assert stored.status is JobStatus.SUCCEEDED
        assert stored.result == n * 10
        assert stored.attempt == 1
    assert Counter(range(25)) == RUNS
    assert await run.stop() == 0


FLAKY_FAILURES: dict[int, int] = {}


@actor(retry=RetryPolicy(max_attempts=3, base=timedelta(seconds=10), jitter=0.0))
async def flaky(payload: Item, ctx: JobContext[Item]) -> int:
    if ctx.attempt <= FLAKY_FAILURES.get(payload.n, 0):
        raise ConnectionError(f"attempt {ctx.attempt} failed")
    return ctx.attempt


async def test_retry_backoff_runs_on_the_fake_clock(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A failing attempt is rescheduled base * 2^(attempt-1) later and retried then."""
    FLAKY_FAILURES[1] = 2
    job_id = (await client.enqueue(flaky.new_job({"n": 1}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"flaky": flaky})
    start = clock.now()
    await run.start()

    first = await job(client, job_id)
    assert first.status is JobStatus.SCHEDULED
    assert first.scheduled_at == start + timedelta(seconds=10)
    assert first.last_error == "attempt 1 failed"

    await run.advance(9)
    assert (await job(client, job_id)).status is JobStatus.SCHEDULED
    await run.advance(2)  # promoted at +10 s, claimed at once, fails again
    second = await job(client, job_id)
    assert second.status is JobStatus.SCHEDULED
    assert second.attempt == 2
    assert second.scheduled_at == start + timedelta(seconds=10 + 20)

    await run.advance(20)
    done = await job(client, job_id)
    assert done.status is JobStatus.SUCCEEDED
    assert done.result == 3
    attempts = await client.attempts(job_id)
    assert [a.outcome for a in attempts] == ["retried", "retried", "succeeded"]
    assert attempts[0].error_class == "ConnectionError"
    assert await run.stop() == 0


async def test_exhausted_retries_fail_with_the_error(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """The last allowed attempt failing ends the job failed with its own error class."""
    FLAKY_FAILURES[2] = 99
    job_id = (await client.enqueue(flaky.new_job({"n": 2}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"flaky": flaky})
    await run.start()
    await run.advance(10 + 20 + 1)
    failed = await job(client, job_id)
    assert failed.status is JobStatus.FAILED
    assert failed.attempt == 3
    attempts = await client.attempts(job_id)
    assert attempts[-1].error_class == "ConnectionError"
    assert run.state.ledger.drain_failures == 1
    await run.stop()


SNOOZED: set[int] = set()


@actor
async def sleepy(payload: Item) -> str:
    if payload.n not in SNOOZED:
        SNOOZED.add(payload.n)
        raise Snooze(timedelta(seconds=30))
    return "awake"


async def test_snooze_reschedules_without_using_an_attempt(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Snooze puts the job back for its delay, counts the snooze, and refunds the attempt."""
    SNOOZED.clear()
    job_id = (await client.enqueue(sleepy.new_job({"n": 1}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"sleepy": sleepy})
    start = clock.now()
    await run.start()
    snoozed = await job(client, job_id)
    assert snoozed.status is JobStatus.SCHEDULED
    assert snoozed.scheduled_at == start + timedelta(seconds=30)
    assert snoozed.snooze_count == 1
    assert snoozed.attempt == 0
    await run.advance(31)
    done = await job(client, job_id)
    assert done.status is JobStatus.SUCCEEDED
    assert done.result == "awake"
    assert done.attempt == 1
    await run.stop()


ASKED: set[int] = set()


@actor(retry=RetryPolicy(max_attempts=1))
async def polite(payload: Item, ctx: JobContext[Item]) -> int:
    if payload.n not in ASKED:
        ASKED.add(payload.n)
        raise RetryAfter(timedelta(seconds=7), consume_budget=False)
    return ctx.attempt


async def test_retry_after_runs_again_after_exactly_its_delay(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """RetryAfter without budget reschedules at now + delay even with no attempts left."""
    ASKED.clear()
    job_id = (await client.enqueue(polite.new_job({"n": 0}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"polite": polite})
    start = clock.now()
    await run.start()
    waiting = await job(client, job_id)
    assert waiting.status is JobStatus.SCHEDULED
    assert waiting.scheduled_at == start + timedelta(seconds=7)
    assert waiting.attempt == 0
    await run.advance(8)
    done = await job(client, job_id)
    assert done.status is JobStatus.SUCCEEDED
    assert done.result == 1
    await run.stop()


async def test_invalid_payload_fails_once_with_the_validation_message(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A payload that does not validate fails the job, never retried, message stored."""
    job_id = (
        await client.enqueue(NewJob(actor="record", payload={"n": "not a number"}, max_attempts=3))
    ).job_id
    run = WorkerRun(backend, clock, {"record": record})
    await run.start()
    failed = await job(client, job_id)
    assert failed.status is JobStatus.FAILED
    assert failed.attempt == 1
    assert failed.last_error is not None
    assert "does not validate" in failed.last_error
    assert "n" in failed.last_error
    attempts = await client.attempts(job_id)
    assert [(a.outcome, a.error_class) for a in attempts] == [("failed", "PayloadValidationError")]
    assert Counter() == RUNS
    await run.stop()


async def test_unknown_actor_is_released_and_logged(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A claimed job whose actor is not registered goes back to wait 10 s, not left running."""
    run = WorkerRun(backend, clock, {"record": record})
    job_id = (await client.enqueue(NewJob(actor="ghost", payload={}))).job_id
    # A claim that (unlike the producer's) does not filter by actor, as a
    # misbehaving adapter or a registry changed under a claim would give us.
    claimed = await claim_one(
        run.store, worker_id=run.worker.worker_id, queue="default", actor="ghost"
    )
    start = clock.now()
    async with open_dispatcher(run.state) as dispatcher:
        await dispatcher.dispatch(claimed)
    released = await job(client, job_id)
    assert released.status is JobStatus.SCHEDULED
    assert released.scheduled_at == start + timedelta(seconds=10)
    assert released.attempt == 0
    [record_] = events_named(caplog, events.DISPATCH_ACTOR_NOT_FOUND)
    assert record_.levelno == logging.ERROR
    assert fields(record_)["actor"] == "ghost"
    assert fields(record_)["registered"] == ["record"]


GATE: dict[int, asyncio.Event] = {}
RUNNING: set[int] = set()


@actor(max_concurrent=2)
async def gated(payload: Item) -> None:
    RUNNING.add(payload.n)
    try:
        await GATE.setdefault(payload.n, asyncio.Event()).wait()
    finally:
        RUNNING.discard(payload.n)


async def test_max_concurrent_caps_running_jobs_of_an_actor(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """An actor with max_concurrent=2 never has more than two jobs running."""
    GATE.clear()
    RUNNING.clear()
    for n in range(5):
        await client.enqueue(gated.new_job({"n": n}, now=clock.now()))
    run = WorkerRun(backend, clock, {"gated": gated}, make_settings(max_concurrency=8))
    await run.start()
    assert {0, 1} == RUNNING
    await run.advance(30)
    assert {0, 1} == RUNNING
    GATE[0].set()
    await run.advance(5)  # the next claim happens at the poll interval at the latest
    assert {1, 2} == RUNNING
    for n in range(5):
        GATE.setdefault(n, asyncio.Event()).set()
    await run.advance(20)
    assert set() == RUNNING
    assert await client.count_active() == 0
    await run.stop()


async def test_scheduled_job_runs_at_its_time(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A job scheduled one minute ahead stays scheduled until then and runs right after."""
    at = clock.now() + timedelta(seconds=60)
    job_id = (
        await client.enqueue(record.new_job({"n": 5}, scheduled_at=at, now=clock.now()))
    ).job_id
    run = WorkerRun(backend, clock, {"record": record})
    await run.start()
    await run.advance(59)
    assert (await job(client, job_id)).status is JobStatus.SCHEDULED
    await run.advance(1.5)
    done = await job(client, job_id)
    assert done.status is JobStatus.SUCCEEDED
    assert done.finished_at is not None
    assert at <= done.finished_at <= at + timedelta(seconds=1.5)
    await run.stop()


async def test_notify_wakes_the_producer_before_the_poll_interval(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A job enqueued while the worker idles runs without any time passing (NOTIFY)."""
    run = WorkerRun(backend, clock, {"record": record})
    await run.start()
    job_id = (await client.enqueue(record.new_job({"n": 1}, now=clock.now()))).job_id
    await clock.run_until_idle()
    assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    await run.stop()


async def test_without_notify_the_producer_polls(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """With NOTIFY off a new job waits for the next poll (poll_interval)."""
    run = WorkerRun(
        backend, clock, {"record": record}, make_settings(notify_enabled=False, poll_interval=2.0)
    )
    await run.start()
    job_id = (await client.enqueue(record.new_job({"n": 1}, now=clock.now()))).job_id
    await clock.run_until_idle()
    assert (await job(client, job_id)).status is JobStatus.PENDING
    await run.advance(2)
    assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    await run.stop()


async def test_a_backlog_drains_batch_after_batch_without_waiting(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A full batch is followed by another claim as soon as slots free: no poll wait."""
    for n in range(30):
        await client.enqueue(record.new_job({"n": n}, now=clock.now()))
    settings = make_settings(max_concurrency=3, notify_enabled=False, poll_interval=60.0)
    run = WorkerRun(backend, clock, {"record": record}, settings)
    await run.start()
    assert Counter(range(30)) == RUNS
    assert clock.monotonic() == 0
    await run.stop()


async def test_a_failed_claim_is_retried_at_the_next_poll(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The store failing a claim is logged; the producer claims again one poll later."""
    job_id = (await client.enqueue(record.new_job({"n": 1}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"record": record}, make_settings(notify_enabled=False))
    run.store.set_reachable(False)
    run_task = asyncio.create_task(run.worker.run())
    await clock.run_until_idle()
    assert run_task.done()  # cannot even register: refuses to start
    assert run_task.result() == 1
    assert run.worker.problem is not None
    assert "unreachable" in run.worker.problem

    run = WorkerRun(backend, clock, {"record": record}, make_settings(notify_enabled=False))
    await run.start()
    run.store.set_reachable(False)
    await client.enqueue(record.new_job({"n": 2}, now=clock.now()))
    await run.advance(1)
    assert len(events_named(caplog, events.PRODUCER_CLAIM_FAILED)) >= 1
    run.store.set_reachable(True)
    await run.advance(1)
    assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert await run.stop() == 0


async def test_a_lost_listen_session_comes_back_at_once_and_wakes_the_producer(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """After the LISTEN session dies the notifier reconnects without waiting for the health
    check, and its catch-up wake-up claims a job whose own wake-up was lost meanwhile."""
    run = WorkerRun(backend, clock, {"record": record}, make_settings(notify_poll_interval=60.0))
    await run.start()
    notifier = run.ports.notifier
    assert isinstance(notifier, MemoryNotifier)
    notifier.sever()
    job_id = (await client.enqueue(record.new_job({"n": 1}, now=clock.now()))).job_id
    await clock.run_until_idle()  # no time passes: neither a poll nor a health check
    assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert notifier.reconnects == 1
    await run.stop()


async def test_a_listen_session_lost_in_an_outage_is_restored_by_the_health_check(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A session lost while the database is down comes back at the first health check
    after it is up again, and that reconnect wakes the producer."""
    run = WorkerRun(backend, clock, {"record": record}, make_settings(notify_poll_interval=60.0))
    await run.start()
    notifier = run.ports.notifier
    assert isinstance(notifier, MemoryNotifier)
    backend.set_reachable(False)
    await run.advance(0.5)
    backend.set_reachable(True)
    job_id = (await client.enqueue(record.new_job({"n": 1}, now=clock.now()))).job_id
    await run.advance(4)
    assert (await job(client, job_id)).status is JobStatus.PENDING  # its wake-up was lost
    await run.advance(1)  # health check at 5 s: reconnected, and a catch-up claim
    assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert notifier.reconnects == 1
    assert await run.stop() == 0


async def test_a_job_started_while_the_shutdown_forces_is_handed_back_at_once(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Forced before its task existed: the task never runs, and its consumer hands the job
    back right away (pending, attempt not counted; never ``cancelled``, which only a user
    asks for) instead of waiting for the shutdown to finish."""
    run = WorkerRun(backend, clock, {"record": record})
    job_id = (await client.enqueue(record.new_job({"n": 7}, now=clock.now()))).job_id
    claimed = await claim_one(
        run.store, worker_id=run.worker.worker_id, queue="default", actor="record"
    )
    run.state.stopping.cancel = "forced"
    async with open_dispatcher(run.state) as dispatcher:
        await asyncio.wait_for(dispatcher.dispatch(claimed), timeout=5)
    handed_back = await job(client, job_id)
    assert (handed_back.status, handed_back.attempt) == (JobStatus.PENDING, 0)
    assert [a.outcome for a in await client.attempts(job_id)] == ["interrupted"]
    assert RUNS[7] == 0


TASKS: dict[int, tuple[str, asyncio.Task[object] | None]] = {}


@actor
async def whose_task(payload: Item) -> None:
    """Records the task it runs in; odd payloads suspend first, even ones never do."""
    if payload.n % 2:
        await asyncio.sleep(0)
    task = asyncio.current_task()
    TASKS[payload.n] = (task.get_name() if task is not None else "", task)


async def test_every_actor_runs_in_a_task_of_its_own(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """An actor that never suspends (run at once where Python starts tasks eagerly) and
    one that does both see their own task, not their consumer's: cancelling or timing
    out "the current task" inside an actor touches that job alone."""
    TASKS.clear()
    ids = [
        (await client.enqueue(whose_task.new_job({"n": n}, now=clock.now()))).job_id
        for n in range(4)
    ]
    run = WorkerRun(backend, clock, {"whose_task": whose_task}, make_settings(max_concurrency=2))
    await run.start()
    await run.advance(1)
    assert sorted(TASKS) == [0, 1, 2, 3]
    for n, job_id in enumerate(ids):
        assert TASKS[n][0] == f"taskq-job-{job_id}"
    assert len({id(task) for _, task in TASKS.values()}) == 4
    assert await run.stop() == 0


@actor(retry=RetryPolicy(kind="non_retryable"))
async def failing_group(payload: Item) -> None:
    """A TaskGroup whose child fails cancels its parent task: the job's, nothing else."""

    async def child() -> None:
        raise ValueError(f"child {payload.n} failed")

    async with asyncio.TaskGroup() as group:
        group.create_task(child())


async def test_a_task_group_failing_inside_an_actor_fails_that_job_only(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    bad = (await client.enqueue(failing_group.new_job({"n": 1}, now=clock.now()))).job_id
    good = (await client.enqueue(record.new_job({"n": 2}, now=clock.now()))).job_id
    registry: Registry = {"failing_group": failing_group, "record": record}
    run = WorkerRun(backend, clock, registry, make_settings(max_concurrency=1))
    await run.start()
    await run.advance(1)
    failed = await job(client, bad)
    assert failed.status is JobStatus.FAILED
    assert "ExceptionGroup" in (failed.last_error or "")
    assert (await job(client, good)).status is JobStatus.SUCCEEDED
    assert await run.stop() == 0
