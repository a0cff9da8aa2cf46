"""What an attempt's start on record means, kept by every write that touches it.

The reclaim sweep, the drain and isolate-self tell jobs that never ran from
jobs that did by ``started_at``; the attempt history shows when each attempt
began. So a claim clears an earlier attempt's start, a mark never moves a start
already written, and every attempt record keeps its attempt's start.
"""

from __future__ import annotations

from datetime import timedelta

from taskq.ports.store_params import Interruption, Isolation, ReclaimReport, Reschedule
from taskq.testing.harness import Harness

from .helpers import LEASE, TICK, at, claim_one, enqueue_and_claim, get, new_job, register


async def test_a_claim_clears_an_earlier_attempts_start(harness: Harness) -> None:
    """A retry claimed ahead has no start of its own, though its first attempt had one: a
    worker dying before it starts keeps its attempt (it is not taken for a run)."""
    store = harness.store
    first = await enqueue_and_claim(store, new_job(max_attempts=2))
    await store.reschedule(Reschedule(lease=first.lease, run_at=at(1), error="x", now=at(1)))
    ahead = await claim_one(store, now=at(2))
    assert ahead.started is False
    assert (await get(store, ahead.id)).started_at is None
    report = await store.reclaim_expired(now=at(2) + LEASE + TICK)
    assert report == ReclaimReport(repended=(ahead.id,), unstarted=(ahead.id,))


async def test_a_second_start_mark_keeps_the_first(harness: Harness) -> None:
    """mark_started keeps a mark already written: the start is when the attempt began."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    assert await store.mark_started([claimed.lease], now=at(2)) == []
    assert await store.mark_started([claimed.lease], now=at(7)) == []
    assert (await get(store, claimed.id)).started_at == at(2)


async def test_a_mark_keeps_the_start_the_claim_wrote(harness: Harness) -> None:
    """A job its claim started keeps the claim's time through a later mark."""
    store = harness.store
    claimed = await enqueue_and_claim(store, now=at(1))
    assert await store.mark_started([claimed.lease], now=at(4)) == []
    assert (await get(store, claimed.id)).started_at == at(1)


async def test_an_interruption_fills_an_unmarked_start(harness: Harness) -> None:
    """Interruption.started_ago fills the start of an attempt with no mark, as on Finish."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    await store.interrupt(
        Interruption(
            lease=claimed.lease,
            retryable=True,
            run_at=at(10),
            error_class="WorkerShutdown",
            error="stop",
            started_ago=timedelta(seconds=2),
            now=at(5),
        )
    )
    [record] = await store.attempts(claimed.id)
    assert record.started_at == at(3)


async def test_a_lease_expired_record_keeps_the_attempts_start(harness: Harness) -> None:
    """The sweep's record of a started attempt says when it began."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=3), now=at(0))
    await store.reclaim_expired(now=claimed.lock_expires_at + TICK)
    [record] = await store.attempts(claimed.id)
    assert (record.outcome, record.started_at) == ("lease_expired", at(0))


async def test_an_isolation_record_keeps_the_attempts_start(harness: Harness) -> None:
    """isolate_worker's record of a started attempt says when it began."""
    store = harness.store
    await register(store, "w1")
    claimed = await enqueue_and_claim(store, new_job("r"), now=at(1))
    await store.isolate_worker(
        Isolation(worker_id="w1", retryable_actors=["r"], retry_at=at(5), now=at(3))
    )
    [record] = await store.attempts(claimed.id)
    assert record.started_at == at(1)


async def test_time_to_lease_expiry_counts_jobs_not_started(harness: Harness) -> None:
    """A claimed-ahead job is running too: its lease counts, or a dead worker's unstarted
    jobs would never be reclaimed."""
    store = harness.store
    await enqueue_and_claim(store, started=False, lease=timedelta(seconds=10))
    assert await store.time_to_lease_expiry(now=at(4)) == timedelta(seconds=6)
