"""JobFinisher.interrupt: the owner stopped an attempt for its own reasons (its shutdown).

An interruption is not the job's failure and not a user's cancel: a retryable
job waits again with its attempt refunded, a non-retryable one is abandoned
(it never runs twice), and the attempt is recorded as interrupted, with why.
"""

from __future__ import annotations

import pytest

from taskq.domain.errors import LeaseLost
from taskq.domain.job import ClaimedJob
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish, Interruption
from taskq.testing.harness import Harness

from .helpers import at, claim_one, enqueue_and_claim, get, new_job

WHY = "worker shutdown (SIGTERM): still running after the cancellation grace; task cancelled"


def _interruption(job: ClaimedJob, *, retryable: bool, run_at_s: float = 5) -> Interruption:
    return Interruption(
        lease=job.lease,
        retryable=retryable,
        run_at=at(run_at_s),
        error_class="WorkerShutdown",
        error=WHY,
        now=at(5),
    )


async def test_a_retryable_job_waits_again_with_its_attempt_refunded(harness: Harness) -> None:
    """Interrupted on its last attempt, a retryable job is pending again as the same
    attempt, runs again, and its history keeps the interrupted attempt."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=1))
    await store.interrupt(_interruption(claimed, retryable=True))
    got = await get(store, claimed.id)
    assert (got.status, got.attempt, got.scheduled_at, got.locked_by) == (
        JobStatus.PENDING,
        0,
        at(5),
        None,
    )
    assert got.last_error == WHY
    [record] = await store.attempts(claimed.id)
    assert (record.outcome, record.attempt, record.error_class, record.error) == (
        "interrupted",
        1,
        "WorkerShutdown",
        WHY,
    )
    assert (record.worker_id, record.finished_at) == ("w1", at(5))
    again = await claim_one(store, worker="w2", now=at(6))
    assert (again.id, again.attempt) == (claimed.id, 1)


async def test_a_later_run_at_schedules_the_job(harness: Harness) -> None:
    """run_at after now makes the interrupted job scheduled at run_at."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.interrupt(_interruption(claimed, retryable=True, run_at_s=30))
    got = await get(store, claimed.id)
    assert (got.status, got.scheduled_at) == (JobStatus.SCHEDULED, at(30))


async def test_a_non_retryable_job_is_abandoned(harness: Harness) -> None:
    """A non-retryable interrupted job ends abandoned, finished now: it never runs twice."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=1))
    await store.interrupt(_interruption(claimed, retryable=False))
    got = await get(store, claimed.id)
    assert (got.status, got.finished_at, got.attempt, got.last_error) == (
        JobStatus.ABANDONED,
        at(5),
        1,
        WHY,
    )
    assert [r.outcome for r in await store.attempts(claimed.id)] == ["interrupted"]
    assert await store.count_active() == 0


@pytest.mark.parametrize("retryable", [True, False])
async def test_a_stale_owner_cannot_interrupt(harness: Harness, retryable: bool) -> None:
    """An interruption of a lease no longer held raises LeaseLost and changes nothing."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.finish(Finish(lease=claimed.lease, status=JobStatus.SUCCEEDED, now=at(2)))
    with pytest.raises(LeaseLost):
        await store.interrupt(_interruption(claimed, retryable=retryable))
    got = await get(store, claimed.id)
    assert (got.status, got.finished_at) == (JobStatus.SUCCEEDED, at(2))
    assert [r.outcome for r in await store.attempts(claimed.id)] == ["succeeded"]
