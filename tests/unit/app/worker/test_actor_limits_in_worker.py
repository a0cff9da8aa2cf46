"""Rate limits and reservations enforced by whole workers (memory adapter, fake clock).

A denied job is snoozed without being invoked and without using an attempt;
a reservation is held across every worker on the backend and given back
when the job ends, however it ends.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from datetime import datetime, timedelta

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, events_named, fields, job, make_settings

from taskq import ConcurrencyLimit, RateLimit
from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.context import JobContext
from taskq.app.worker import Worker, WorkerPorts, events
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus
from taskq.ports.rate_limiter import RateLimiter

WINDOW = timedelta(seconds=60)
GPU_KEY = "reservation:gpu"
#: Fake seconds a `gpu` job holds its slot.
GPU_SECONDS = 5.0


class Work(BaseModel):
    n: int
    fail: bool = False


CLOCK: FakeClock | None = None
RUNS: Counter[int] = Counter()
#: (n, worker id, began, ended) of every `gpu` run, on the fake clock.
SPANS: list[tuple[int, str, datetime, datetime]] = []
RELEASE = asyncio.Event()


@pytest.fixture(autouse=True)
def _reset(clock: FakeClock) -> None:
    global CLOCK, RELEASE
    CLOCK = clock
    RELEASE = asyncio.Event()
    RUNS.clear()
    SPANS.clear()


@actor(rate_limits=[RateLimit("k", limit=1, per=WINDOW)])
async def rated(payload: Work) -> int:
    RUNS[payload.n] += 1
    return payload.n


@actor(reservations=[ConcurrencyLimit("gpu", capacity=1)])
async def gpu(payload: Work, ctx: JobContext[Work]) -> int:
    assert CLOCK is not None
    RUNS[payload.n] += 1
    began = CLOCK.now()
    await CLOCK.sleep(GPU_SECONDS)
    SPANS.append((payload.n, ctx.worker_id, began, CLOCK.now()))
    return payload.n


@actor(
    reservations=[ConcurrencyLimit("gpu", capacity=1)],
    retry=RetryPolicy(kind="non_retryable"),
)
async def gpu_gated(payload: Work) -> int:
    """Holds the slot until RELEASE, then returns or raises."""
    RUNS[payload.n] += 1
    await RELEASE.wait()
    if payload.fail:
        raise ValueError(f"job {payload.n} failed")
    return payload.n


REGISTRY = {"rated": rated, "gpu": gpu, "gpu_gated": gpu_gated}


async def slot_is_free(limiter: RateLimiter) -> bool:
    """Whether someone else could take the `gpu` slot now; gives it back at once."""
    probe = await limiter.reserve(GPU_KEY, capacity=1, holder="probe", lease=WINDOW)
    if probe is None:
        return False
    await limiter.release(probe)
    return True


def assert_no_overlap(spans: list[tuple[int, str, datetime, datetime]]) -> None:
    ordered = sorted(spans, key=lambda s: s[2])
    for before, after in itertools.pairwise(ordered):
        assert after[2] >= before[3], f"job {after[0]} began while job {before[0]} ran"


# -- rate limits -----------------------------------------------------------------------


async def test_a_rate_limited_job_is_snoozed_until_the_window_ends(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """limit=1 per minute: one job runs, the other is snoozed (not invoked, attempt
    refunded, snooze_count 1) until the window ends, then runs."""
    window_start = clock.now()  # the fake clock starts on a minute boundary
    clock.advance(15)
    first, second = [
        (await client.enqueue(rated.new_job({"n": n}, now=clock.now()))).job_id for n in (1, 2)
    ]
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()

    assert Counter({1: 1}) == RUNS
    assert (await job(client, first)).status is JobStatus.SUCCEEDED
    snoozed = await job(client, second)
    assert snoozed.status is JobStatus.SCHEDULED
    assert snoozed.attempt == 0
    assert snoozed.snooze_count == 1
    assert snoozed.scheduled_at == window_start + WINDOW
    [denial] = events_named(caplog, events.DISPATCH_RATE_LIMITED)
    assert fields(denial)["job_id"] == second
    assert fields(denial)["retry_after_seconds"] == 45.0

    await run.advance(44)
    assert Counter({1: 1}) == RUNS
    await run.advance(2)
    done = await job(client, second)
    assert (done.status, done.attempt, done.result) == (JobStatus.SUCCEEDED, 1, 2)
    assert Counter({1: 1, 2: 1}) == RUNS
    assert await run.stop() == 0


# -- reservations ----------------------------------------------------------------------


async def test_a_reservation_held_by_one_worker_holds_off_the_other(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Worker A runs a gpu job; worker B's gpu job is denied (snoozed) until A's ends."""
    [first] = [(await client.enqueue(gpu.new_job({"n": 1}, now=clock.now()))).job_id]
    a = WorkerRun(backend, clock, REGISTRY, make_settings(max_concurrency=1))
    await a.start()
    assert Counter({1: 1}) == RUNS
    a.state.producer_stop.set()  # A takes no more jobs: the next one is B's
    b = WorkerRun(backend, clock, REGISTRY, make_settings(max_concurrency=1))
    await b.start()
    second = (await client.enqueue(gpu.new_job({"n": 2}, now=clock.now()))).job_id
    await b.advance(0.1)  # less than any reservation retry delay

    assert Counter({1: 1}) == RUNS  # B took job 2 and was refused the slot
    waiting = await job(client, second)
    assert (waiting.status, waiting.attempt, waiting.snooze_count) == (JobStatus.SCHEDULED, 0, 1)
    assert second in [
        fields(r)["job_id"] for r in events_named(caplog, events.DISPATCH_RESERVATION_UNAVAILABLE)
    ]

    await b.advance(3 * GPU_SECONDS)
    assert [(n, w) for n, w, _, _ in SPANS] == [(1, a.worker.worker_id), (2, b.worker.worker_id)]
    assert_no_overlap(SPANS)
    for job_id in (first, second):
        assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert await a.stop() == 0
    assert await b.stop() == 0


async def test_two_workers_never_run_two_reserved_jobs_at_once(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """capacity=1 across two workers with two slots each: six jobs all succeed, once each,
    one at a time."""
    ids = [(await client.enqueue(gpu.new_job({"n": n}, now=clock.now()))).job_id for n in range(6)]
    runs = [WorkerRun(backend, clock, REGISTRY, make_settings(max_concurrency=2)) for _ in "ab"]
    for run in runs:
        await run.start()
    await runs[0].advance(6 * GPU_SECONDS * 4)

    for job_id in ids:
        stored = await job(client, job_id)
        assert (stored.status, stored.attempt) == (JobStatus.SUCCEEDED, 1)
    assert Counter(range(6)) == RUNS
    assert len(SPANS) == 6
    assert_no_overlap(SPANS)
    for run in runs:
        assert await run.stop() == 0


@pytest.mark.parametrize(
    ("fail", "status"), [(False, JobStatus.SUCCEEDED), (True, JobStatus.FAILED)]
)
async def test_the_reservation_is_released_whatever_the_outcome(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    fail: bool,
    status: JobStatus,
) -> None:
    """The slot is held while the job runs and free once it ended, succeeded or raised."""
    limiter = backend.rate_limiter()
    job_id = (
        await client.enqueue(gpu_gated.new_job({"n": 1, "fail": fail}, now=clock.now()))
    ).job_id
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    assert Counter({1: 1}) == RUNS
    assert not await slot_is_free(limiter)

    RELEASE.set()
    await clock.run_until_idle()
    assert (await job(client, job_id)).status is status
    assert await slot_is_free(limiter)
    assert await run.stop() == 0


# -- no limiter ------------------------------------------------------------------------


async def test_a_worker_without_a_limiter_refuses_to_run_limited_actors(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No rate limiter in the ports: exit 1 with worker-config-error naming the limited
    actors, and the queued job is not touched."""
    job_id = (await client.enqueue(rated.new_job({"n": 1}, now=clock.now()))).job_id
    ports = WorkerPorts(
        store=backend.store(),
        leader_lock=backend.leader_lock(),
        notifier=backend.notifier(),
        clock=clock,
    )
    worker = Worker(make_settings(), REGISTRY, ports, hard_trip=False, loop_lag=False)
    task = asyncio.create_task(worker.run())
    await clock.advance_async(1)
    if not task.done():  # it started: fail instead of running forever
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        pytest.fail("the worker started with limited actors and no rate limiter")
    assert task.result() == 1
    [refusal] = events_named(caplog, events.WORKER_CONFIG_ERROR)
    assert "'gpu', 'gpu_gated', 'rated'" in fields(refusal)["error"]
    assert "no rate limiter" in fields(refusal)["error"]
    untouched = await job(client, job_id)
    assert (untouched.status, untouched.attempt) == (JobStatus.PENDING, 0)
    assert Counter() == RUNS
    assert await client.list_workers() == []
