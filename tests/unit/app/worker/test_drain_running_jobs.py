"""The shutdown drain with jobs running that have no start mark yet (fake clock).

The drain empties the local queue, flushes the start marks of every job a
consumer holds, and only then re-pends this worker's unstarted rows: a
running job is never re-pended (it would run twice), the queued ones are,
with their attempt refunded. If the marks cannot be written, nothing is
re-pended at all.
"""

from __future__ import annotations

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
from taskq.app.actors import actor
from taskq.app.worker import events
from taskq.app.worker.start_marks import START_MARK_DELAY
from taskq.domain.errors import StoreUnavailable
from taskq.domain.job import Lease
from taskq.domain.status import JobStatus


class Work(BaseModel):
    n: int


CLOCK: FakeClock | None = None
RUNS: Counter[int] = Counter()
#: Fake seconds each job runs: longer than the start-mark delay, shorter than the grace.
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


class Recording(StoreProxy):
    """The memory store; counts drain_unstarted calls, and can fail mark_started."""

    def __init__(self, inner: MemoryQueueStore, *, marks_fail: bool = False) -> None:
        super().__init__(inner)
        self.marks_fail = marks_fail
        self.mark_calls = 0
        self.drain_calls = 0

    async def mark_started(self, leases: Sequence[Lease], **kwargs: Any) -> list[Lease]:
        self.mark_calls += 1
        if self.marks_fail:
            raise StoreUnavailable("start marks: connection refused")
        return await self._inner.mark_started(leases, **kwargs)

    async def drain_unstarted(self, worker_id: str, **kwargs: Any) -> int:
        self.drain_calls += 1
        return int(await self._inner.drain_unstarted(worker_id, **kwargs))


async def three_jobs(client: MemoryQueueStore, clock: FakeClock) -> list[int]:
    return [
        (await client.enqueue(busy.new_job({"n": n}, now=clock.now()))).job_id for n in range(3)
    ]


async def test_the_drain_keeps_a_running_job_and_repends_the_queued_one(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One slot: job 0 runs (unmarked), job 1 waits in the local queue, job 2 is pending.
    A shutdown before the mark delay re-pends job 1 (attempt refunded); job 0 runs on and
    succeeds, once."""
    running, queued, waiting = await three_jobs(client, clock)
    store = Recording(backend.store())
    settings = make_settings(max_concurrency=1, cancellation_grace_period=30.0)
    run = WorkerRun(backend, clock, {"busy": busy}, settings, store=store)
    await run.start()
    assert Counter({0: 1}) == RUNS
    assert (await job(client, running)).started_at is None  # no mark yet
    assert (await job(client, queued)).status is JobStatus.RUNNING  # claimed, queued locally
    assert clock.monotonic() < START_MARK_DELAY

    run.worker.request_shutdown()
    await clock.run_until_idle()
    assert store.drain_calls == 1
    still = await job(client, running)
    assert still.status is JobStatus.RUNNING
    assert still.started_at is not None  # the drain marked it first
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


async def test_no_drain_when_the_start_marks_cannot_be_written(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """mark_started failing: drain_unstarted is never called, an error is logged, the
    running job still succeeds once, and the queued job is left to its lease."""
    running, queued, _ = await three_jobs(client, clock)
    store = Recording(backend.store(), marks_fail=True)
    settings = make_settings(max_concurrency=1, cancellation_grace_period=30.0)
    run = WorkerRun(backend, clock, {"busy": busy}, settings, store=store)
    await run.start()
    run.worker.request_shutdown()
    await clock.run_until_idle()

    assert store.mark_calls >= 1
    assert store.drain_calls == 0
    failures = events_named(caplog, events.JOB_WRITE_FAILED)
    assert {fields(r)["write"] for r in failures} >= {"start", "drain_unstarted"}
    [refusal] = [r for r in failures if fields(r)["write"] == "drain_unstarted"]
    assert "start marks of running jobs were not confirmed" in fields(refusal)["error"]
    assert all(r.levelname == "ERROR" for r in failures)
    assert (await job(client, running)).status is JobStatus.RUNNING

    assert await run.finish(within=JOB_SECONDS + 5) == 0
    assert store.drain_calls == 0
    done = await job(client, running)
    assert (done.status, done.attempt) == (JobStatus.SUCCEEDED, 1)
    assert done.started_at is not None  # the terminal write recorded the start
    assert Counter({0: 1}) == RUNS
    left = await job(client, queued)
    assert (left.status, left.attempt, left.locked_by) == (
        JobStatus.RUNNING,
        1,
        run.worker.worker_id,
    )
