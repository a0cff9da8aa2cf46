"""Claims that start their jobs: ``ClaimRequest.start_now`` marks the jobs consumers wait for.

A worker runs a job only once it is marked started, by the claim (for the
consumers waiting when it claimed) or by ``mark_started`` (for the jobs it
claimed ahead). So an empty ``started_at`` means the job never ran, which the
drain, the reclaim sweep and isolate-self rely on.
"""

from __future__ import annotations

from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, Finish
from taskq.testing.harness import Harness

from .helpers import ACTORS, LEASE, at, claim, enqueue_n, get, register


async def test_the_first_start_now_jobs_are_claimed_started(harness: Harness) -> None:
    """start_now=2 of 4: the first two in dispatch order are started at the claim's time,
    the other two have no started_at and say so."""
    store = harness.store
    ids = await enqueue_n(store, 4)
    claimed = await claim(store, limit=4, start_now=2, now=at(5))
    assert [job.id for job in claimed] == ids
    assert [job.started for job in claimed] == [True, True, False, False]
    started_at = [(await get(store, job_id)).started_at for job_id in ids]
    assert started_at == [at(5), at(5), None, None]


async def test_start_now_beyond_the_claim_starts_every_claimed_job(harness: Harness) -> None:
    """start_now larger than what the claim takes marks all of it; 0 marks none."""
    store = harness.store
    await enqueue_n(store, 3)
    first = await claim(store, limit=2, start_now=10, now=at(1))
    assert [job.started for job in first] == [True, True]
    rest = await claim(store, limit=5, start_now=0, now=at(1))
    assert [job.started for job in rest] == [False]


async def test_a_mark_after_an_unstarted_claim_starts_the_job(harness: Harness) -> None:
    """mark_started on a claimed-ahead job records its start; the drain then keeps it."""
    store = harness.store
    await register(store, "w1")
    await enqueue_n(store, 2)
    ahead, kept_ahead = await claim(store, limit=2, now=at(1))
    assert await store.mark_started([ahead.lease], now=at(2)) == []
    assert (await get(store, ahead.id)).started_at == at(2)
    assert await store.drain_unstarted("w1", now=at(3)) == 1
    assert (await get(store, ahead.id)).status is JobStatus.RUNNING
    assert (await get(store, kept_ahead.id)).status is JobStatus.PENDING


async def test_finish_and_claim_starts_the_first_start_now_jobs(harness: Harness) -> None:
    """The claim half of finish_and_claim honours start_now as claim does."""
    store = harness.store
    await enqueue_n(store, 4)
    [running] = await claim(store, limit=1, start_now=1, now=at(1))
    _, claimed = await store.finish_and_claim(
        [Finish(lease=running.lease, status=JobStatus.SUCCEEDED, now=at(2))],
        ClaimRequest(
            worker_id="w1",
            queues=["default"],
            actors=ACTORS,
            limit=3,
            lease=LEASE,
            start_now=1,
            now=at(2),
        ),
    )
    assert [job.started for job in claimed] == [True, False, False]
    assert (await get(store, claimed[0].id)).started_at == at(2)
    assert (await get(store, claimed[1].id)).started_at is None
