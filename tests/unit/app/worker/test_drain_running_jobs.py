"""The shutdown drain with a running job, a queued one, and one whose start mark is in flight.

The drain empties the local queue, flushes the start marks of every job a
consumer holds, and only then re-pends this worker's unstarted rows: a
running job is never re-pended (it would run twice), the queued ones are,
with their attempt refunded. A gated job whose mark was still on its way
loses the race to the drain or wins it, never both: it runs only if its mark
found the lease still held.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

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
from taskq.app.actors import ActorRef, actor
from taskq.app.worker import events
from taskq.domain.job import Lease
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus


class Work(BaseModel):
    n: int


CLOCK: FakeClock | None = None
RUNS: Counter[int] = Counter()
#: Fake seconds each job runs: shorter than the grace.
JOB_SECONDS = 5.0


@pytest.fixture(autouse=True)
def _reset(clock: FakeClock) -> None:
    global CLOCK
    CLOCK = clock
    RUNS.clear()


@actor
async def busy(payload: Work) -> int:
    """Does its work without looking at cancel requests."""
    assert CLOCK is not None
    RUNS[payload.n] += 1
    await CLOCK.sleep(JOB_SECONDS)
    return payload.n


@actor(retry=RetryPolicy(kind="non_retryable"))
async def busy_once(payload: Work) -> int:
    """As ``busy``, but non_retryable: a claimed-ahead one waits for its start mark."""
    return int(await busy.fn(payload))


class Recording(StoreProxy):
    """The memory store; counts drain_unstarted calls, and can hold mark_started back."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.mark_calls = 0
        self.drain_calls = 0
        self.gate: asyncio.Event | None = None

    async def mark_started(self, leases: Sequence[Lease], **kwargs: Any) -> list[Lease]:
        self.mark_calls += 1
        if self.gate is not None:
            await self.gate.wait()
        return await self._inner.mark_started(leases, **kwargs)

    async def drain_unstarted(self, worker_id: str, **kwargs: Any) -> int:
        self.drain_calls += 1
        return int(await self._inner.drain_unstarted(worker_id, **kwargs))


async def three_jobs(
    client: MemoryQueueStore, clock: FakeClock, ref: ActorRef[Work, int] = busy
) -> list[int]:
    return [(await client.enqueue(ref.new_job({"n": n}, now=clock.now()))).job_id for n in range(3)]


async def test_the_drain_keeps_a_running_job_and_repends_the_queued_one(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One slot: job 0 runs (started by its claim), job 1 waits in the local queue, job 2
    is pending. A shutdown re-pends job 1 (attempt refunded); job 0 runs on and succeeds,
    once."""
    running, queued, waiting = await three_jobs(client, clock)
    store = Recording(backend.store())
    settings = make_settings(max_concurrency=1, cancellation_grace_period=30.0)
    run = WorkerRun(backend, clock, {"busy": busy}, settings, store=store)
    await run.start()
    assert Counter({0: 1}) == RUNS
    assert (await job(client, running)).started_at is not None  # its claim started it
    ahead = await job(client, queued)
    assert (ahead.status, ahead.started_at) == (JobStatus.RUNNING, None)  # claimed ahead

    run.worker.request_shutdown()
    await clock.run_until_idle()
    assert store.drain_calls == 1
    assert store.mark_calls == 0
    assert (await job(client, running)).status is JobStatus.RUNNING
    repended = await job(client, queued)
    assert (repended.status, repended.attempt, repended.locked_by) == (
        JobStatus.PENDING,
        0,
        None,
    )
    [drained] = [
        r for r in events_named(caplog, events.SHUTDOWN_PHASE) if fields(r)["phase"] == "DRAINED"
    ]
    assert (fields(drained)["repended"], fields(drained)["discarded_local"]) == (1, 1)

    assert await run.finish(within=JOB_SECONDS + 5) == 0
    done = await job(client, running)
    assert (done.status, done.attempt, done.result) == (JobStatus.SUCCEEDED, 1, 0)
    assert [a.outcome for a in await client.attempts(running)] == ["succeeded"]
    assert Counter({0: 1}) == RUNS  # jobs 1 and 2 never ran here
    assert await client.attempts(queued) == []
    assert (await job(client, waiting)).status is JobStatus.PENDING
    assert events_named(caplog, events.JOB_LEASE_LOST) == []


async def test_a_job_whose_mark_loses_to_the_drain_does_not_run(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The consumer took the claimed-ahead non_retryable job 1 and waits for its mark when
    the shutdown drains: the drain re-pends it, the mark then finds the lease gone, and job
    1 is not run here (job-lease-lost at INFO, as the shutdown expects it)."""
    _, queued, _ = await three_jobs(client, clock, busy_once)
    store = Recording(backend.store())
    store.gate = asyncio.Event()
    settings = make_settings(max_concurrency=1, cancellation_grace_period=30.0)
    run = WorkerRun(backend, clock, {"busy_once": busy_once}, settings, store=store)
    await run.start()
    await run.advance(JOB_SECONDS + 0.5)  # job 0 ended; the consumer waits on job 1's mark
    assert store.mark_calls == 1
    assert Counter({0: 1}) == RUNS

    run.worker.request_shutdown()
    await clock.run_until_idle()
    assert store.drain_calls == 1
    assert (await job(client, queued)).status is JobStatus.PENDING
    store.gate.set()
    assert await run.finish(within=10) == 0

    assert Counter({0: 1}) == RUNS
    repended = await job(client, queued)
    assert (repended.status, repended.attempt, repended.started_at) == (
        JobStatus.PENDING,
        0,
        None,
    )
    [lost] = events_named(caplog, events.JOB_LEASE_LOST)
    assert (fields(lost)["job_id"], fields(lost)["write"], lost.levelname) == (
        queued,
        "start",
        "INFO",
    )
