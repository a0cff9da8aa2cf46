"""JobFinisher.reschedule and JobClaimer.release: retries, snoozes, RetryAfter, releases."""

from __future__ import annotations

from datetime import timedelta

import pytest

from taskq.domain.status import JobStatus
from taskq.ports.store_params import Heartbeat, Reschedule
from taskq.testing.harness import Harness

from .helpers import at, claim, claim_one, enqueue_and_claim, get, new_job, register


async def test_retry_schedules_the_job_and_consumes_the_attempt(harness: Harness) -> None:
    """A later retry makes the job scheduled at run_at, consumes the attempt, records the error."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.reschedule(
        Reschedule(
            lease=claimed.lease, run_at=at(30), error="boom", error_class="ValueError", now=at(2)
        )
    )
    got = await get(store, claimed.id)
    assert got.status is JobStatus.SCHEDULED
    assert got.scheduled_at == at(30)
    assert got.attempt == 1
    assert got.last_error == "boom"
    assert got.finished_at is None
    [record] = await store.attempts(claimed.id)
    assert (record.job_id, record.attempt, record.worker_id) == (claimed.id, 1, "w1")
    assert (record.error_class, record.error, record.finished_at) == ("ValueError", "boom", at(2))

    assert await claim(store, now=at(29)) == []
    assert await store.promote_scheduled(now=at(30)) == 1
    again = await claim_one(store, worker="w2", now=at(30))
    assert again.id == claimed.id
    assert again.attempt == 2
    assert again.fencing_token != claimed.fencing_token


async def test_retry_due_now_is_pending_at_once(harness: Harness) -> None:
    """A reschedule whose run_at is not after now makes the job pending, claimable at once."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.reschedule(Reschedule(lease=claimed.lease, run_at=at(4), now=at(4)))
    got = await get(store, claimed.id)
    assert got.status is JobStatus.PENDING
    assert got.scheduled_at == at(4)
    assert (await claim_one(store, now=at(4))).attempt == 2


async def test_retry_in_the_past_is_pending(harness: Harness) -> None:
    """A reschedule whose run_at already passed makes the job pending."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.reschedule(Reschedule(lease=claimed.lease, run_at=at(1), now=at(4)))
    assert (await get(store, claimed.id)).status is JobStatus.PENDING
    assert (await claim_one(store, now=at(4))).id == claimed.id


async def test_retry_after_without_budget_refunds_the_attempt(harness: Harness) -> None:
    """refund_attempt gives the attempt back: the next claim is attempt 1 again."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=1))
    await store.reschedule(
        Reschedule(lease=claimed.lease, run_at=at(10), refund_attempt=True, now=at(1))
    )
    got = await get(store, claimed.id)
    assert got.status is JobStatus.SCHEDULED
    assert got.attempt == 0
    assert got.snooze_count == 0
    await store.promote_scheduled(now=at(10))
    assert (await claim_one(store, now=at(10))).attempt == 1
    assert [r.attempt for r in await store.attempts(claimed.id)] == [1]


async def test_snooze_counts_snoozes_and_refunds_attempts(harness: Harness) -> None:
    """Each snooze refunds the attempt and increments snooze_count, keeping other metadata."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(metadata={"keep": "me"}))
    for n in (1, 2):
        await store.reschedule(
            Reschedule(
                lease=claimed.lease,
                run_at=at(10 * n),
                refund_attempt=True,
                snooze=True,
                now=at(10 * n - 5),
            )
        )
        got = await get(store, claimed.id)
        assert got.status is JobStatus.SCHEDULED
        assert got.scheduled_at == at(10 * n)
        assert got.attempt == 0
        assert got.snooze_count == n
        assert got.metadata["keep"] == "me"
        assert await store.promote_scheduled(now=at(10 * n)) == 1
        claimed = await claim_one(store, now=at(10 * n))
        assert claimed.attempt == 1
        assert claimed.snooze_count == n
    assert len(await store.attempts(claimed.id)) == 2


async def test_rescheduled_job_leaves_its_workers_heartbeat(harness: Harness) -> None:
    """After a reschedule the worker's heartbeat no longer reports or extends the job."""
    store = harness.store
    await register(store, "w1")
    claimed = await enqueue_and_claim(store)
    await store.reschedule(Reschedule(lease=claimed.lease, run_at=at(100), now=at(1)))
    report = await store.heartbeat(
        Heartbeat(worker_id="w1", lease=timedelta(seconds=60), now=at(2))
    )
    assert report.running == ()
    got = await get(store, claimed.id)
    assert got.status is JobStatus.SCHEDULED
    assert got.scheduled_at == at(100)


async def test_release_schedules_after_delay_and_refunds(harness: Harness) -> None:
    """release puts an owned job back, scheduled delay after now, with its attempt refunded."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=1))
    await store.release(claimed.lease, delay=timedelta(seconds=10), now=at(3))
    got = await get(store, claimed.id)
    assert got.status is JobStatus.SCHEDULED
    assert got.scheduled_at == at(13)
    assert got.attempt == 0
    await store.promote_scheduled(now=at(13))
    assert (await claim_one(store, now=at(13))).attempt == 1


#: As for terminal writes (test_finish.ESCAPED_ERRORS): given, then stored.
ESCAPED_ERRORS = {
    "nul": (("nul \x00 inside", "E\x00"), ("nul \\x00 inside", "E\\x00")),
    "lone surrogate": (("x \udcff y", "E"), ("x \\udcff y", "E")),
}


@pytest.mark.parametrize(("given", "stored"), ESCAPED_ERRORS.values(), ids=ESCAPED_ERRORS.keys())
async def test_a_retry_error_no_store_can_keep_is_stored_escaped(
    harness: Harness, given: tuple[str, str], stored: tuple[str, str]
) -> None:
    """As for a terminal write: the retry lands, each character written visibly."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    error, error_class = given
    await store.reschedule(
        Reschedule(
            lease=claimed.lease, run_at=at(60), error=error, error_class=error_class, now=at(2)
        )
    )
    got = await get(store, claimed.id)
    assert (got.status, got.last_error) == (JobStatus.SCHEDULED, stored[0])
    [record] = await store.attempts(claimed.id)
    assert (record.error, record.error_class) == stored
