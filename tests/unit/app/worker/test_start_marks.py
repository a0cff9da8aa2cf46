"""Start marks in a whole worker (memory adapter, fake clock).

A job a waiting consumer takes is started by its claim. A retryable job claimed
ahead (it waited in the local queue; here every job is, through ``ClaimedAhead``)
that ends before ``START_MARK_DELAY`` gets no start mark of its own; its terminal
write records when it began. A longer one is marked a moment after it began,
with ``started_at`` still its real start. A mark that finds the lease gone asks
the job to stop. A gated job (non_retryable, or reclaimed unstarted before) runs
only once its mark found the lease held.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
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
from taskq.app.context import JobContext
from taskq.app.worker import events
from taskq.app.worker.protocols import Registry
from taskq.app.worker.start_marks import START_MARK_DELAY
from taskq.domain.errors import StoreUnavailable
from taskq.domain.job import Lease
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest


class Run(BaseModel):
    n: int
    seconds: float = 0.0


#: The fake clock the actors sleep on (set per test) and when each job began.
CLOCK: FakeClock | None = None
BEGAN: dict[int, datetime] = {}
SAW_CANCEL: list[bool] = []
RELEASE = asyncio.Event()


@pytest.fixture(autouse=True)
def _reset(clock: FakeClock) -> None:
    global CLOCK, RELEASE
    CLOCK = clock
    RELEASE = asyncio.Event()
    BEGAN.clear()
    SAW_CANCEL.clear()


@actor
async def timed(payload: Run) -> int:
    """Runs ``seconds`` of fake time (0: only yields to the loop)."""
    assert CLOCK is not None
    BEGAN[payload.n] = CLOCK.now()
    await CLOCK.sleep(payload.seconds)
    return payload.n


@actor
async def watcher(payload: Run, ctx: JobContext[Run]) -> None:
    """Runs until asked to stop."""
    assert CLOCK is not None
    BEGAN[payload.n] = CLOCK.now()
    await ctx.cancel_event.wait()
    SAW_CANCEL.append(ctx.cancelled)


REGISTRY: Registry = {"timed": timed, "watcher": watcher}


class ClaimedAhead(StoreProxy):
    """The memory store, as if no consumer were ever waiting when the worker claimed:
    every job is claimed ahead (no ``start_now``)."""

    async def claim(self, request: ClaimRequest) -> Any:
        return await self._inner.claim(replace(request, start_now=0))

    async def finish_and_claim(self, finishes: Sequence[Any], request: ClaimRequest) -> Any:
        return await self._inner.finish_and_claim(finishes, replace(request, start_now=0))


class MarkCounter(ClaimedAhead):
    """Jobs claimed ahead; records each mark_started call's leases."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.marked: list[list[Lease]] = []

    async def mark_started(self, leases: Sequence[Lease], **kwargs: Any) -> list[Lease]:
        self.marked.append(list(leases))
        return await self._inner.mark_started(leases, **kwargs)

    def marked_jobs(self) -> list[int]:
        return [lease.job_id for batch in self.marked for lease in batch]


async def test_quick_jobs_get_no_mark_and_record_when_they_began(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Jobs ending before the delay: no mark_started at all, started_at = when they began,
    not when their terminal write landed."""
    quick = 0.1
    assert quick < START_MARK_DELAY
    store = MarkCounter(backend.store())
    instant = (await client.enqueue(timed.new_job({"n": 1}, now=clock.now()))).job_id
    short = (
        await client.enqueue(timed.new_job({"n": 2, "seconds": quick}, now=clock.now()))
    ).job_id
    run = WorkerRun(backend, clock, REGISTRY, store=store)
    await run.start()
    await run.advance(1)

    for n, job_id in ((1, instant), (2, short)):
        stored = await job(client, job_id)
        assert stored.status is JobStatus.SUCCEEDED
        assert stored.started_at == BEGAN[n]
    finished = (await job(client, short)).finished_at
    assert finished == BEGAN[2] + timedelta(seconds=quick)  # the write came later
    assert store.marked == []
    assert await run.stop() == 0


async def test_a_long_job_is_marked_once_with_its_real_start(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A 5 s job gets one start mark; started_at is when it began, finished_at 5 s later."""
    store = MarkCounter(backend.store())
    job_id = (await client.enqueue(timed.new_job({"n": 1, "seconds": 5.0}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, store=store)
    await run.start()
    await run.advance(6)
    stored = await job(client, job_id)
    assert stored.status is JobStatus.SUCCEEDED
    assert stored.started_at == BEGAN[1]
    assert stored.finished_at == BEGAN[1] + timedelta(seconds=5)
    assert store.marked_jobs() == [job_id]
    assert await run.stop() == 0


async def test_a_running_job_shows_its_start_a_moment_after_it_began(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Before the delay the row has no started_at; after it, status running and started_at
    equal to when the job began (not when the mark was written), while it still runs."""
    clock.advance(3)  # a start time that is not the clock's origin
    job_id = (await client.enqueue(watcher.new_job({"n": 1}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, store=ClaimedAhead(backend.store()))
    await run.start()
    began = BEGAN[1]

    await run.advance(START_MARK_DELAY / 2)
    early = await job(client, job_id)
    assert early.status is JobStatus.RUNNING
    assert early.started_at is None

    await run.advance(START_MARK_DELAY)
    marked = await job(client, job_id)
    assert marked.status is JobStatus.RUNNING
    assert marked.started_at == began
    assert marked.finished_at is None
    assert await run.stop() == 0


async def test_a_mark_that_finds_the_lease_gone_asks_the_job_to_stop(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The job was reclaimed before its mark: the mark reports the lease lost, the job's
    cancel_event is set and job-lease-lost is logged with write="start"."""
    job_id = (await client.enqueue(watcher.new_job({"n": 1}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, store=ClaimedAhead(backend.store()))
    await run.start()
    assert BEGAN.keys() == {1}
    token = (await job(client, job_id)).fencing_token
    # The lease runs out before the mark (a stalled worker) and the sweep re-pends the job.
    backend.jobs[job_id].lock_expires_at = clock.now() - timedelta(seconds=1)
    assert (await client.reclaim_expired()).repended == (job_id,)
    run.state.producer_stop.set()  # keep this worker from claiming it again
    assert SAW_CANCEL == []

    await run.advance(START_MARK_DELAY)
    assert SAW_CANCEL == [True]
    [lost, *later] = events_named(caplog, events.JOB_LEASE_LOST)
    assert fields(lost) == {"job_id": job_id, "fencing_token": token, "write": "start"}
    assert lost.levelno == logging.WARNING
    assert all(fields(r)["write"] != "start" for r in later)  # one start report only
    after = await job(client, job_id)
    assert after.status is JobStatus.PENDING  # the sweep's, not overwritten
    assert after.started_at is None


class SlowReplies(ClaimedAhead):
    """Jobs claimed ahead, whose claims answer ``delay`` seconds (fake time) after they land."""

    def __init__(self, inner: MemoryQueueStore, clock: FakeClock, delay: float) -> None:
        super().__init__(inner)
        self._clock = clock
        self._delay = delay

    async def claim(self, request: ClaimRequest) -> Any:
        claimed = await super().claim(request)
        await self._clock.sleep(self._delay)
        return claimed

    async def finish_and_claim(self, finishes: Sequence[Any], request: ClaimRequest) -> Any:
        answer = await super().finish_and_claim(finishes, request)
        await self._clock.sleep(self._delay)
        return answer


async def test_a_write_that_waited_for_a_claim_still_records_the_real_start(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A quick job ends while the producer's next claim is in flight: its terminal write
    waits for that claim's answer, and started_at is still when the job began (the wait
    is added to started_ago as the write leaves, not lost). Both are shorter than the
    start-mark delay, so no mark records the start instead."""
    quick, slow_reply = 0.01, 0.1
    assert quick + slow_reply < START_MARK_DELAY
    ids = [
        (await client.enqueue(timed.new_job({"n": n, "seconds": quick}, now=clock.now()))).job_id
        for n in (1, 2)
    ]
    run = WorkerRun(backend, clock, REGISTRY, store=SlowReplies(backend.store(), clock, slow_reply))
    await run.start()
    await run.advance(3)
    for n, job_id in zip((1, 2), ids, strict=True):
        stored = await job(client, job_id)
        assert stored.status is JobStatus.SUCCEEDED
        assert stored.finished_at is not None
        assert stored.finished_at > BEGAN[n] + timedelta(seconds=quick)  # the write waited
        assert stored.started_at == BEGAN[n]
    assert await run.stop() == 0


class FailingWrites(ClaimedAhead):
    """Jobs claimed ahead; every start mark and the first terminal write refused."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.refused = 0

    async def mark_started(self, leases: Sequence[Lease], **kwargs: Any) -> list[Lease]:
        raise StoreUnavailable("marks are down")

    async def finish_many(self, outcomes: Sequence[Any]) -> Any:
        if not self.refused:
            self.refused += 1
            raise StoreUnavailable("down for a moment")
        return await self._inner.finish_many(outcomes)

    async def finish_and_claim(self, finishes: Sequence[Any], request: ClaimRequest) -> Any:
        if finishes and not self.refused:
            self.refused += 1
            raise StoreUnavailable("down for a moment")
        return await super().finish_and_claim(finishes, request)


async def test_a_terminal_write_sent_again_still_records_the_real_start(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """The first terminal write fails and is retried after its delay (no start mark lands
    meanwhile): started_at is still when the job began, not shifted by the retry."""
    job_id = (
        await client.enqueue(timed.new_job({"n": 1, "seconds": 0.01}, now=clock.now()))
    ).job_id
    store = FailingWrites(backend.store())
    run = WorkerRun(backend, clock, REGISTRY, store=store)
    await run.start()
    await run.advance(5)
    stored = await job(client, job_id)
    assert store.refused == 1
    assert stored.status is JobStatus.SUCCEEDED
    assert stored.finished_at is not None
    assert stored.finished_at >= BEGAN[1] + timedelta(seconds=0.5)  # after the retry delay
    assert stored.started_at == BEGAN[1]
    assert await run.stop() == 0


# -- the claim's marks and the start gate ----------------------------------------------


class Gated(BaseModel):
    n: int
    seconds: float = 0.0


#: The backend the gated actors read (set per test).
BACKEND: MemoryBackend | None = None
#: Per job number: how often it ran, and its row's started_at as its actor began.
RUNS: Counter[int] = Counter()
ROW_STARTED_AT: dict[int, datetime | None] = {}


@pytest.fixture(autouse=True)
def _reset_gate(backend: MemoryBackend) -> None:
    global BACKEND
    BACKEND = backend
    RUNS.clear()
    ROW_STARTED_AT.clear()


async def _record_start(payload: Gated) -> int:
    assert CLOCK is not None
    assert BACKEND is not None
    RUNS[payload.n] += 1
    [row] = [r for r in BACKEND.jobs.values() if r.payload.get("n") == payload.n]
    ROW_STARTED_AT[payload.n] = row.started_at
    await CLOCK.sleep(payload.seconds)
    return payload.n


@actor(retry=RetryPolicy(kind="non_retryable"))
async def once(payload: Gated) -> int:
    """Non-retryable: records its row's started_at as it begins, then runs ``seconds``."""
    return await _record_start(payload)


@actor
async def again(payload: Gated) -> int:
    """Retryable: records its row's started_at as it begins, then runs ``seconds``."""
    return await _record_start(payload)


GATE_REGISTRY: Registry = {"once": once, "again": again}
ONE_SLOT = make_settings(max_concurrency=1)


class GateMarks(StoreProxy):
    """The memory store, recording each mark_started call's leases; it can hold marks
    back (``gate``) or refuse the next ones (``fail_next``)."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.marked: list[list[Lease]] = []
        self.fail_next = 0
        self.gate: asyncio.Event | None = None

    async def mark_started(self, leases: Sequence[Lease], **kwargs: Any) -> list[Lease]:
        self.marked.append(list(leases))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_next:
            self.fail_next -= 1
            raise StoreUnavailable("start marks: connection refused")
        return await self._inner.mark_started(leases, **kwargs)

    def marked_jobs(self) -> list[int]:
        return [lease.job_id for batch in self.marked for lease in batch]


async def enqueue(
    client: MemoryQueueStore, clock: FakeClock, ref: Any, n: int, seconds: float = 0
) -> int:
    new = ref.new_job({"n": n, "seconds": seconds}, now=clock.now())
    return int((await client.enqueue(new)).job_id)


async def test_a_job_a_waiting_consumer_takes_is_started_by_its_claim(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """An idle worker's claim starts the job itself: no mark_started, and the row says
    started (at the claim's time) before the actor's first step."""
    clock.advance(3)  # a start time that is not the clock's origin
    job_id = await enqueue(client, clock, once, 1)
    store = GateMarks(backend.store())
    run = WorkerRun(backend, clock, GATE_REGISTRY, store=store)
    claimed_at = clock.now()
    await run.start()
    await run.advance(1)
    assert {1: claimed_at} == ROW_STARTED_AT
    stored = await job(client, job_id)
    assert (stored.status, stored.started_at) == (JobStatus.SUCCEEDED, claimed_at)
    assert store.marked == []
    assert await run.stop() == 0


async def test_a_job_claimed_ahead_is_marked_before_it_runs(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """One slot, two non_retryable jobs: the second is claimed while the first runs, so
    unstarted; the consumer marks it and only then runs it (its row already says
    started), so a crash can never make it run twice."""
    first = await enqueue(client, clock, once, 1, seconds=2.0)
    second = await enqueue(client, clock, once, 2)
    store = GateMarks(backend.store())
    run = WorkerRun(backend, clock, GATE_REGISTRY, ONE_SLOT, store=store)
    await run.start()
    await run.advance(0.5)
    ahead = await job(client, second)
    assert (ahead.status, ahead.started_at) == (JobStatus.RUNNING, None)  # claimed ahead
    assert store.marked == []
    await run.advance(3)
    assert store.marked_jobs() == [second]
    assert ROW_STARTED_AT[2] is not None
    for job_id in (first, second):
        assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert Counter({1: 1, 2: 1}) == RUNS
    assert await run.stop() == 0


async def test_a_mark_that_finds_the_lease_gone_does_not_run_the_job(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The claimed-ahead job was re-pended while its mark was on its way: the mark reports
    the lease lost, the job does not run here, and job-lease-lost says write="start"."""
    await enqueue(client, clock, once, 1, seconds=2.0)
    second = await enqueue(client, clock, once, 2)
    store = GateMarks(backend.store())
    store.gate = asyncio.Event()
    run = WorkerRun(backend, clock, GATE_REGISTRY, ONE_SLOT, store=store)
    await run.start()
    await run.advance(2.5)  # the first ended; the consumer waits for the second's mark
    assert store.marked_jobs() == [second]
    token = (await job(client, second)).fencing_token
    run.state.producer_stop.set()  # keep this worker from claiming it again
    backend.jobs[second].lock_expires_at = clock.now()
    clock.advance(1)
    assert (await client.reclaim_expired()).unstarted == (second,)
    store.gate.set()
    await run.advance(1)

    assert 2 not in RUNS
    after = await job(client, second)
    assert (after.status, after.attempt, after.started_at) == (JobStatus.PENDING, 0, None)
    [lost] = events_named(caplog, events.JOB_LEASE_LOST)
    assert fields(lost) == {"job_id": second, "fencing_token": token, "write": "start"}
    assert lost.levelno == logging.WARNING
    assert await run.stop() == 0


async def test_a_failed_mark_leaves_the_job_unrun_until_it_is_given_back(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A mark the store refused: the job does not run; the heartbeat finds it held by nobody
    here, gives it back (attempt refunded) and it runs once, as attempt 1."""
    await enqueue(client, clock, once, 1, seconds=2.0)
    second = await enqueue(client, clock, once, 2)
    store = GateMarks(backend.store())
    store.fail_next = 1
    run = WorkerRun(backend, clock, GATE_REGISTRY, ONE_SLOT, store=store)
    await run.start()
    await run.advance(2.5)
    assert 2 not in RUNS
    [failed] = [r for r in events_named(caplog, events.JOB_WRITE_FAILED) if r.levelname == "ERROR"]
    assert (fields(failed)["write"], fields(failed)["job_id"]) == ("start", second)

    await run.advance(3 * ONE_SLOT.heartbeat_interval)
    assert [fields(r)["job_id"] for r in events_named(caplog, events.JOB_ORPHAN_RELEASED)] == [
        second
    ]
    done = await job(client, second)
    assert (done.status, done.attempt) == (JobStatus.SUCCEEDED, 1)
    assert Counter({1: 1, 2: 1}) == RUNS
    assert await run.stop() == 0


async def test_a_retryable_job_claimed_ahead_runs_without_waiting_for_a_mark(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """One slot, two retryable jobs: the claimed-ahead one runs at once (its row has no
    start yet: no round trip before it), and a quick one never needs a mark at all."""
    await enqueue(client, clock, again, 1, seconds=2.0)
    second = await enqueue(client, clock, again, 2)
    store = GateMarks(backend.store())
    run = WorkerRun(backend, clock, GATE_REGISTRY, ONE_SLOT, store=store)
    await run.start()
    await run.advance(3)
    assert ROW_STARTED_AT[2] is None
    assert store.marked == []
    done = await job(client, second)
    assert (done.status, done.started_at) == (JobStatus.SUCCEEDED, done.finished_at)
    assert await run.stop() == 0


async def test_a_retryable_job_reclaimed_unstarted_before_is_gated(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A retryable job a dead worker held with no start on record (it may have killed that
    worker at once) waits for its mark this time: a second crash counts its attempt."""
    await enqueue(client, clock, again, 1, seconds=2.0)
    second = await enqueue(client, clock, again, 2)
    backend.jobs[second].metadata = {"reclaimed_unstarted": 1}
    store = GateMarks(backend.store())
    run = WorkerRun(backend, clock, GATE_REGISTRY, ONE_SLOT, store=store)
    await run.start()
    await run.advance(3)
    assert store.marked_jobs() == [second]
    assert ROW_STARTED_AT[2] is not None
    assert (await job(client, second)).status is JobStatus.SUCCEEDED
    assert await run.stop() == 0
