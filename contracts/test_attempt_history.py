"""Attempt history: every ended attempt leaves one record whose outcome names how it ended."""

from __future__ import annotations

from datetime import timedelta

from contracts.harness import Harness
from contracts.helpers import LEASE, at, claim_one, enqueue_and_claim, new_job, register
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish, Isolation, Reschedule


async def _outcomes(harness: Harness, job_id: int) -> list[str]:
    return [record.outcome for record in await harness.store.attempts(job_id)]


async def test_terminal_writes_record_the_status_as_outcome(harness: Harness) -> None:
    """A terminal write records an attempt whose outcome is the terminal status's value."""
    store = harness.store
    for status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED):
        claimed = await enqueue_and_claim(store, new_job(actor=f"a-{status.value}"))
        await store.finish(Finish(lease=claimed.lease, status=status, now=at(1)))
        assert await _outcomes(harness, claimed.id) == [status.value]


async def test_reschedules_record_retried_snoozed_and_released(harness: Harness) -> None:
    """A retry records "retried", a snooze "snoozed" and a release "released", in order."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.reschedule(Reschedule(lease=claimed.lease, run_at=at(1), now=at(1)))
    again = await claim_one(store, now=at(1))
    await store.reschedule(Reschedule(lease=again.lease, run_at=at(2), snooze=True, now=at(2)))
    third = await claim_one(store, now=at(2))
    await store.release(third.lease, delay=timedelta(0), now=at(3))
    assert await _outcomes(harness, claimed.id) == ["retried", "snoozed", "released"]


async def test_sweeps_record_lease_expired_and_heartbeat_lost(harness: Harness) -> None:
    """A reclaimed lease records "lease_expired"; an isolated worker's job "heartbeat_lost"."""
    store = harness.store
    expired = await enqueue_and_claim(store, new_job(actor="x"))
    await store.reclaim_expired(now=at(0) + LEASE + timedelta(seconds=1))
    assert await _outcomes(harness, expired.id) == ["lease_expired"]

    await register(store, "w9")
    isolated = await enqueue_and_claim(store, new_job(actor="y"), worker="w9")
    await store.isolate_worker(
        Isolation(worker_id="w9", retryable_actors=["y"], retry_at=at(5), now=at(1))
    )
    assert await _outcomes(harness, isolated.id) == ["heartbeat_lost"]
