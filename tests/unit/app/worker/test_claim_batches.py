"""The producer claims in batches of at least half the local queue while consumers are busy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import StoreProxy, WorkerRun, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker.claim_pace import ClaimPace
from taskq.app.worker.local_queue import LocalQueue
from taskq.domain.job import ClaimedJob, Lease
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, Finish


class Item(BaseModel):
    n: int


GATE: list[asyncio.Semaphore] = []


@actor
async def gated(payload: Item) -> None:
    await GATE[0].acquire()


@pytest.fixture(autouse=True)
async def _gate() -> AsyncIterator[None]:
    GATE[:] = [asyncio.Semaphore(0)]
    yield
    GATE.clear()


class ClaimLog(StoreProxy):
    """A store that records the limit of every claim."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.limits: list[int] = []
        #: Terminal writes sent with a claim, and sent on their own, per call.
        self.carried: list[int] = []
        self.flushed: list[int] = []

    async def claim(self, request: ClaimRequest) -> list[ClaimedJob]:
        self.limits.append(request.limit)
        return await self._inner.claim(request)

    async def finish_and_claim(
        self, finishes: Sequence[Finish], request: ClaimRequest
    ) -> tuple[list[Lease], list[ClaimedJob]]:
        self.limits.append(request.limit)
        self.carried.append(len(finishes))
        return await self._inner.finish_and_claim(finishes, request)


class RoundTrips(ClaimLog):
    """A claim that takes a few loop turns, as a database round trip does: consumers
    finish jobs while it is under way."""

    async def claim(self, request: ClaimRequest) -> list[ClaimedJob]:
        for _ in range(5):
            await asyncio.sleep(0)
        return await super().claim(request)

    async def finish_and_claim(
        self, finishes: Sequence[Finish], request: ClaimRequest
    ) -> tuple[list[Lease], list[ClaimedJob]]:
        for _ in range(5):
            await asyncio.sleep(0)
        return await super().finish_and_claim(finishes, request)

    async def finish_many(self, outcomes: Sequence[Finish]) -> list[Lease]:
        self.flushed.append(len(outcomes))
        return await self._inner.finish_many(outcomes)


async def test_a_busy_worker_claims_only_once_half_the_queue_is_free(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """With consumers busy, one freed slot of four claims nothing; two freed slots claim two."""
    for n in range(20):
        await client.enqueue(gated.new_job({"n": n}, now=clock.now()))
    store = ClaimLog(backend.store())
    settings = make_settings(max_concurrency=4, notify_enabled=False, poll_interval=60.0)
    run = WorkerRun(backend, clock, {"gated": gated}, settings, store=store)
    await run.start()
    assert store.limits == [4, 4]  # four running, four waiting in the local queue
    GATE[0].release()
    await clock.run_until_idle()
    assert store.limits == [4, 4]
    GATE[0].release()
    await clock.run_until_idle()
    assert store.limits == [4, 4, 2]
    for _ in range(20):
        GATE[0].release()
    await clock.run_until_idle()
    assert await run.stop() == 0


@actor
async def quick(payload: Item) -> None:
    """Returns at once: a busy worker's round is claim, run, write."""


async def test_finished_jobs_travel_with_the_next_claim(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A busy worker sends the outcomes its consumers queued with its next claim (one
    round trip for both); once no claim follows, the rest are written on their own.
    Every job ends exactly once."""
    ids = [
        (await client.enqueue(quick.new_job({"n": n}, now=clock.now()))).job_id for n in range(60)
    ]
    store = RoundTrips(backend.store())
    settings = make_settings(max_concurrency=4, notify_enabled=False, poll_interval=60.0)
    run = WorkerRun(backend, clock, {"quick": quick}, settings, store=store)
    await run.start()
    await clock.run_until_idle()
    jobs = [await client.get(i) for i in ids]
    assert all(job is not None and job.status is JobStatus.SUCCEEDED for job in jobs)
    assert sum(store.carried) + sum(store.flushed) == 60
    assert sum(store.carried) >= 40, (store.carried, store.flushed)
    for i in ids:
        assert [a.outcome for a in await client.attempts(i)] == ["succeeded"]
    assert await run.stop() == 0


class TimedClaims(ClaimLog):
    """Claims that take 10 ms on the worker's fake clock, as a round trip takes time."""

    def __init__(self, inner: MemoryQueueStore, clock: FakeClock) -> None:
        super().__init__(inner)
        self.clock = clock
        #: Jobs of the worker that were running or claimed when each claim returned.
        self.held: list[int] = []
        #: The local queue's length when each claim started (set ``queue`` to record it).
        self.queue: LocalQueue[ClaimedJob] | None = None
        self.queued_at_start: list[int] = []

    def _started(self) -> None:
        if self.queue is not None:
            self.queued_at_start.append(self.queue.qsize())

    async def _held(self) -> int:
        depths = await self._inner.queue_depths()
        return sum(d.count for d in depths if d.status is JobStatus.RUNNING)

    async def claim(self, request: ClaimRequest) -> list[ClaimedJob]:
        self._started()
        self.clock.advance(0.01)
        jobs = await super().claim(request)
        self.held.append(await self._held())
        return jobs

    async def finish_and_claim(
        self, finishes: Sequence[Finish], request: ClaimRequest
    ) -> tuple[list[Lease], list[ClaimedJob]]:
        self._started()
        self.clock.advance(0.01)
        result = await super().finish_and_claim(finishes, request)
        self.held.append(await self._held())
        return result


async def test_jobs_shorter_than_a_claim_are_claimed_ahead(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Jobs that finish before a claim returns (here in no time, claims in 10 ms): after
    the first jobs ran, a claim also asks for the jobs the consumers finish meanwhile,
    max_concurrency more, and goes out while the last batch still fills the local queue
    (its round trip overlaps the consumers' work); the worker never holds more than
    three times max_concurrency, and every job runs exactly once."""
    ids = [
        (await client.enqueue(quick.new_job({"n": n}, now=clock.now()))).job_id for n in range(80)
    ]
    store = TimedClaims(backend.store(), clock)
    settings = make_settings(max_concurrency=4, notify_enabled=False, poll_interval=60.0)
    run = WorkerRun(backend, clock, {"quick": quick}, settings, store=store)
    store.queue = run.state.local_queue
    await run.start()
    await clock.run_until_idle()
    assert store.limits[0] == 4  # nothing known yet: the free slots only
    assert max(store.queued_at_start) == 4, store.queued_at_start
    assert max(store.limits) == 8, store.limits
    assert max(store.held) <= 12, store.held
    for i in ids:
        assert [a.outcome for a in await client.attempts(i)] == ["succeeded"]
    assert await run.stop() == 0


async def test_jobs_longer_than_a_claim_are_claimed_for_free_slots_only(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Jobs that run a second against 10 ms claims: no claim asks beyond the local
    queue's free slots, so the worker holds its consumers' jobs plus one queue's worth."""
    for n in range(16):
        await client.enqueue(gated.new_job({"n": n}, now=clock.now()))
    store = TimedClaims(backend.store(), clock)
    settings = make_settings(max_concurrency=4, notify_enabled=False, poll_interval=60.0)
    run = WorkerRun(backend, clock, {"gated": gated}, settings, store=store)
    store.queue = run.state.local_queue
    await run.start()
    for _ in range(16):
        clock.advance(1.0)
        GATE[0].release()
        await clock.run_until_idle()
    assert len(store.limits) > 3
    assert max(store.limits) == 4, store.limits
    assert max(store.held) <= 8, store.held
    assert max(store.queued_at_start) <= 2  # a claim waits for half the queue to be free
    assert await run.stop() == 0


class SteadyPace(ClaimPace):
    """Jobs always shorter than a claim: every claim asks ``concurrency`` ahead."""

    def ahead(self) -> int:
        return self.concurrency


async def test_consumers_wake_the_producer_by_its_own_room_rule(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """After a claim ahead overfills the local queue, the producer waits; the consumer
    that brings the queue back to its size wakes it (the producer would claim then:
    the free slots plus what the consumers will free), not only once half the queue
    is free."""
    for n in range(40):
        await client.enqueue(gated.new_job({"n": n}, now=clock.now()))
    store = ClaimLog(backend.store())
    settings = make_settings(max_concurrency=4, notify_enabled=False, poll_interval=60.0)
    run = WorkerRun(backend, clock, {"gated": gated}, settings, store=store)
    run.state.claim_pace = SteadyPace(4)
    await run.start()
    await clock.run_until_idle()
    queue = run.state.local_queue
    # Four running, the queue over its size after a claim of its free slots plus four.
    assert store.limits == [8, 4], store.limits
    assert queue.qsize() == 8
    for _ in range(3):
        GATE[0].release()
    await clock.run_until_idle()
    assert store.limits == [8, 4], store.limits  # still over its size: no claim
    GATE[0].release()
    await clock.run_until_idle()
    assert store.limits == [8, 4, 4], store.limits  # back to its size: claim ahead
    assert queue.qsize() == 8
    for _ in range(40):
        GATE[0].release()
    await clock.run_until_idle()
    assert await run.stop() == 0
