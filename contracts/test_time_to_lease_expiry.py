"""time_to_lease_expiry: how long until the earliest running lease expires, on the store's clock."""

from __future__ import annotations

from datetime import timedelta

from taskq.domain.job import DEFAULT_QUEUE
from taskq.ports.store_params import ClaimRequest, Heartbeat, ReclaimReport
from taskq.testing.harness import Harness

from .helpers import (
    TICK,
    at,
    enqueue,
    enqueue_and_claim,
    get,
    new_job,
    register,
    succeed,
)


async def test_no_running_job_means_no_expiry(harness: Harness) -> None:
    """With only waiting and finished jobs (or none) there is no lease to wait for: None."""
    store = harness.store
    assert await store.time_to_lease_expiry(now=at(0)) is None
    await enqueue(store, new_job(), now=at(0))
    await enqueue(store, new_job(scheduled_at=at(50)), now=at(0))
    finished = await enqueue_and_claim(store, new_job(actor="b"), now=at(1))
    await succeed(store, finished.lease, now=at(2))
    assert await store.time_to_lease_expiry(now=at(3)) is None


async def test_it_is_the_earliest_lock_minus_now(harness: Harness) -> None:
    """The wait is min(lock_expires_at) - now over running jobs, whoever holds them."""
    store = harness.store
    await enqueue_and_claim(store, new_job(actor="a"), worker="w1", lease=timedelta(seconds=30))
    await enqueue_and_claim(
        store, new_job(actor="b"), worker="w2", now=at(2), lease=timedelta(seconds=10)
    )
    assert await store.time_to_lease_expiry(now=at(5)) == timedelta(seconds=7)
    assert await store.time_to_lease_expiry(now=at(5) + TICK) == timedelta(seconds=7) - TICK


async def test_a_heartbeat_moves_the_expiry(harness: Harness) -> None:
    """Extending the earliest lease makes the next one the earliest."""
    store = harness.store
    await register(store, "w1")
    await register(store, "w2")
    await enqueue_and_claim(store, new_job(actor="a"), worker="w1", lease=timedelta(seconds=10))
    await enqueue_and_claim(store, new_job(actor="b"), worker="w2", lease=timedelta(seconds=20))
    assert await store.time_to_lease_expiry(now=at(4)) == timedelta(seconds=6)
    await store.heartbeat(Heartbeat(worker_id="w1", lease=timedelta(seconds=60), now=at(4)))
    assert await store.time_to_lease_expiry(now=at(4)) == timedelta(seconds=16)


async def test_the_sign_says_whether_reclaim_expired_takes_the_job(harness: Harness) -> None:
    """Zero: the lease still holds and reclaim_expired leaves it; negative: reclaim takes it."""
    store = harness.store
    claimed = await enqueue_and_claim(store, lease=timedelta(seconds=10))
    expiry = claimed.lock_expires_at
    assert await store.time_to_lease_expiry(now=expiry) == timedelta(0)
    assert await store.reclaim_expired(now=expiry) == ReclaimReport()
    assert await store.time_to_lease_expiry(now=expiry + TICK) == -TICK
    assert await store.reclaim_expired(now=expiry + TICK) == ReclaimReport(repended=(claimed.id,))
    assert await store.time_to_lease_expiry(now=expiry + TICK) is None


async def test_it_changes_nothing(harness: Harness) -> None:
    """Reading the wait of an expired lease leaves the job running, lease and all."""
    store = harness.store
    claimed = await enqueue_and_claim(store, lease=timedelta(seconds=10))
    before = await get(store, claimed.id)
    assert await store.time_to_lease_expiry(now=at(60)) == timedelta(seconds=-50)
    assert await get(store, claimed.id) == before


async def test_without_now_it_is_measured_on_the_stores_clock(harness: Harness) -> None:
    """A lease taken on the store's clock reads back as at most its length, and not expired."""
    store = harness.store
    lease = timedelta(seconds=60)
    await store.enqueue(new_job())
    request = ClaimRequest(
        worker_id="w1", queues=[DEFAULT_QUEUE], actors=["a"], limit=1, lease=lease
    )
    [claimed] = await store.claim(request)
    wait = await store.time_to_lease_expiry()
    assert wait is not None
    assert timedelta(0) < wait <= lease, (wait, claimed.lock_expires_at)
