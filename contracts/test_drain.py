"""JobClaimer.drain_unstarted: the DRAINING shutdown phase re-pends never-started claims."""

from __future__ import annotations

import pytest

from taskq.domain.errors import LeaseLost
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish
from taskq.testing.harness import Harness

from .helpers import at, claim, claim_one, enqueue, get


async def test_drain_repends_only_this_workers_unstarted_jobs(harness: Harness) -> None:
    """drain_unstarted re-pends this worker's never-started jobs and refunds their attempt."""
    store = harness.store
    ids = [await enqueue(store) for _ in range(4)]
    mine = await claim(store, worker="w1", limit=3, now=at(1))
    [theirs] = await claim(store, worker="w2", limit=1, now=at(1))
    started = mine[0]
    await store.mark_started([started.lease], now=at(2))

    assert await store.drain_unstarted("w1", now=at(3)) == 2
    for job in mine[1:]:
        got = await get(store, job.id)
        assert got.status is JobStatus.PENDING
        assert got.attempt == 0
        assert got.started_at is None
    still = await get(store, started.id)
    assert (still.status, still.locked_by, still.attempt) == (JobStatus.RUNNING, "w1", 1)
    other = await get(store, theirs.id)
    assert (other.status, other.locked_by) == (JobStatus.RUNNING, "w2")
    assert sorted(j.id for j in [*mine, theirs]) == sorted(ids)


async def test_drained_job_is_claimed_again_as_the_same_attempt(harness: Harness) -> None:
    """A drained job's next claim is attempt 1 with a new token; the drained lease is lost."""
    store = harness.store
    await enqueue(store)
    first = await claim_one(store, worker="w1", now=at(1))
    assert await store.drain_unstarted("w1", now=at(2)) == 1
    again = await claim_one(store, worker="w2", now=at(3))
    assert again.id == first.id
    assert again.attempt == 1
    assert again.fencing_token != first.fencing_token
    with pytest.raises(LeaseLost):
        await store.finish(Finish(lease=first.lease, status=JobStatus.SUCCEEDED, now=at(4)))


async def test_drain_with_nothing_unstarted_returns_zero(harness: Harness) -> None:
    """drain_unstarted of a worker whose claims all started re-pends nothing."""
    store = harness.store
    await enqueue(store)
    claimed = await claim_one(store, worker="w1", now=at(1))
    await store.mark_started([claimed.lease], now=at(1))
    assert await store.drain_unstarted("w1", now=at(2)) == 0
    assert await store.drain_unstarted("nobody", now=at(2)) == 0
    assert (await get(store, claimed.id)).status is JobStatus.RUNNING
