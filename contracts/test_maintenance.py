"""The leader's sweeps (promotion, deadlines, prune, archive, results) and the reads they use."""

from __future__ import annotations

from datetime import timedelta

from taskq.domain.status import TERMINAL, JobStatus
from taskq.ports.store_params import Finish, PrunePolicy
from taskq.testing.harness import Harness

from .helpers import (
    TICK,
    at,
    claim,
    claim_one,
    enqueue,
    enqueue_and_claim,
    get,
    new_job,
    succeed,
)

DAY = 86_400.0
RETENTION = {
    JobStatus.SUCCEEDED: timedelta(days=30),
    JobStatus.FAILED: timedelta(days=90),
    JobStatus.CANCELLED: timedelta(days=30),
    JobStatus.ABANDONED: timedelta(days=90),
    JobStatus.CRASHED: timedelta(days=90),
}


# --- scheduled → pending -----------------------------------------------------------------


async def test_scheduled_job_is_promoted_exactly_at_scheduled_at(harness: Harness) -> None:
    """promote_scheduled makes a scheduled job pending exactly at its scheduled_at, not before."""
    store = harness.store
    job_id = await enqueue(store, new_job(scheduled_at=at(60)))
    assert await store.promote_scheduled(now=at(60) - TICK) == 0
    assert (await get(store, job_id)).status is JobStatus.SCHEDULED
    assert await store.promote_scheduled(now=at(60)) == 1
    got = await get(store, job_id)
    assert got.status is JobStatus.PENDING
    assert got.scheduled_at == at(60)
    assert [c.id for c in await claim(store, now=at(60))] == [job_id]


async def test_promotion_counts_only_due_jobs(harness: Harness) -> None:
    """promote_scheduled returns how many jobs it promoted and leaves later ones scheduled."""
    store = harness.store
    due = [await enqueue(store, new_job(scheduled_at=at(10 + i))) for i in range(3)]
    later = await enqueue(store, new_job(scheduled_at=at(100)))
    assert await store.promote_scheduled(now=at(20)) == 3
    assert await store.promote_scheduled(now=at(20)) == 0
    assert [(await get(store, i)).status for i in due] == [JobStatus.PENDING] * 3
    assert (await get(store, later)).status is JobStatus.SCHEDULED


# --- deadlines ---------------------------------------------------------------------------


async def test_waiting_jobs_past_their_deadline_fail(harness: Harness) -> None:
    """fail_past_deadline fails waiting jobs past schedule_to_close with DeadlineExceeded."""
    store = harness.store
    pending = await enqueue(store, new_job(schedule_to_close=at(30)))
    scheduled = await enqueue(store, new_job(scheduled_at=at(60), schedule_to_close=at(30)))
    in_time = await enqueue(store, new_job(schedule_to_close=at(90)))
    no_deadline = await enqueue(store, new_job())
    assert await store.fail_past_deadline(now=at(30) - TICK) == []
    failed = await store.fail_past_deadline(now=at(30) + TICK)
    assert sorted(failed) == sorted([pending, scheduled])
    for job_id in (pending, scheduled):
        got = await get(store, job_id)
        assert got.status is JobStatus.FAILED
        assert got.finished_at == at(30) + TICK
        errors = [got.last_error] + [a.error_class for a in await store.attempts(job_id)]
        assert any("DeadlineExceeded" in (e or "") for e in errors), errors
    for job_id in (in_time, no_deadline):
        assert (await get(store, job_id)).status is JobStatus.PENDING


async def test_running_jobs_are_not_failed_by_the_deadline_sweep(harness: Harness) -> None:
    """fail_past_deadline leaves running jobs to their owner."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(schedule_to_close=at(30)))
    assert await store.fail_past_deadline(now=at(40)) == []
    assert (await get(store, claimed.id)).status is JobStatus.RUNNING


# --- prune and archive -------------------------------------------------------------------


async def _finished(harness: Harness, status: JobStatus, finished: float) -> int:
    claimed = await enqueue_and_claim(harness.store, now=at(finished))
    await harness.store.finish(Finish(lease=claimed.lease, status=status, now=at(finished)))
    return claimed.id


async def test_prune_archives_by_per_status_retention(harness: Harness) -> None:
    """prune moves terminal jobs finished before now - retention[status], once, and nothing else."""
    store = harness.store
    await _finished(harness, JobStatus.SUCCEEDED, 0)  # pruned first
    old_failed = await _finished(harness, JobStatus.FAILED, 0)
    new_ok = await _finished(harness, JobStatus.SUCCEEDED, 29 * DAY)
    cancelled = await enqueue(store, new_job(), now=at(0))
    await store.request_cancel(cancelled, now=at(DAY))
    waiting = await enqueue(store, new_job(), now=at(0))

    policy = PrunePolicy(
        retention=RETENTION, archive_retention=timedelta(days=365), now=at(40 * DAY)
    )
    assert await store.prune(policy) == 2  # old_ok and cancelled
    assert await store.prune(policy) == 0
    for kept in (old_failed, new_ok, waiting):
        assert await store.get(kept) is not None
    assert (await get(store, waiting)).status is JobStatus.PENDING
    assert await store.count_active() == 1

    later = PrunePolicy(
        retention=RETENTION, archive_retention=timedelta(days=365), now=at(100 * DAY)
    )
    assert await store.prune(later) == 2  # old_failed and new_ok


async def test_prune_keeps_statuses_without_a_retention(harness: Harness) -> None:
    """A terminal status missing from the retention map is never pruned."""
    store = harness.store
    failed = await _finished(harness, JobStatus.FAILED, 0)
    policy = PrunePolicy(
        retention={JobStatus.SUCCEEDED: timedelta(days=1)},
        archive_retention=timedelta(days=1),
        now=at(1000 * DAY),
    )
    assert await store.prune(policy) == 0
    assert (await get(store, failed)).status is JobStatus.FAILED


async def test_prune_in_small_batches_moves_everything_eventually(harness: Harness) -> None:
    """Repeated prunes with a small batch size archive every eligible job exactly once."""
    store = harness.store
    for _ in range(5):
        await _finished(harness, JobStatus.SUCCEEDED, 0)
    policy = PrunePolicy(
        retention=RETENTION, archive_retention=timedelta(days=1), batch_size=2, now=at(31 * DAY)
    )
    moved = 0
    for _ in range(10):
        step = await store.prune(policy)
        assert step >= 0
        moved += step
        if step == 0:
            break
    assert moved == 5


async def test_archive_expiry_deletes_archived_jobs_for_good(harness: Harness) -> None:
    """expire_archive hard-deletes archived jobs once their archive retention has passed."""
    store = harness.store
    pruned = await _finished(harness, JobStatus.SUCCEEDED, 0)
    kept = await _finished(harness, JobStatus.FAILED, 0)
    prune_at = 31 * DAY
    policy = PrunePolicy(
        retention=RETENTION, archive_retention=timedelta(days=365), now=at(prune_at)
    )
    assert await store.prune(policy) == 1
    assert await store.expire_archive(now=at(prune_at)) == 0
    assert await store.expire_archive(now=at(prune_at + 365 * DAY + 1)) == 1
    assert await store.expire_archive(now=at(prune_at + 365 * DAY + 1)) == 0
    assert await store.get(pruned) is None
    assert (await get(store, kept)).status is JobStatus.FAILED


# --- results -----------------------------------------------------------------------------


async def test_expired_results_are_cleared(harness: Harness) -> None:
    """expire_results clears results past result_expires_at, keeping other results and the job."""
    store = harness.store
    short = await enqueue_and_claim(store)
    await store.finish(
        Finish(
            lease=short.lease,
            status=JobStatus.SUCCEEDED,
            result={"v": 1},
            result_ttl=timedelta(seconds=10),
            now=at(0),
        )
    )
    forever = await enqueue_and_claim(store)
    await store.finish(
        Finish(lease=forever.lease, status=JobStatus.SUCCEEDED, result={"v": 2}, now=at(0))
    )
    assert await store.expire_results(now=at(10) - TICK) == 0
    assert (await get(store, short.id)).result == {"v": 1}
    assert await store.expire_results(now=at(10) + TICK) == 1
    gone = await get(store, short.id)
    assert gone.result is None
    assert gone.status is JobStatus.SUCCEEDED
    assert (await get(store, forever.id)).result == {"v": 2}
    assert await store.expire_results(now=at(10 * DAY)) == 0


# --- reads the sweeps rely on ------------------------------------------------------------


async def test_count_active_counts_waiting_and_running(harness: Harness) -> None:
    """count_active counts pending, scheduled and running jobs, optionally on some queues only."""
    store = harness.store
    await enqueue(store, new_job(queue="q1"))
    await enqueue(store, new_job(queue="q1", scheduled_at=at(60)))
    await enqueue(store, new_job(queue="q2"))
    done = await enqueue_and_claim(store, new_job(queue="q3"))
    await succeed(store, done.lease, now=at(1))
    await claim_one(store, queues=["q2"], now=at(1))
    assert await store.count_active() == 3
    assert await store.count_active(["q1"]) == 2
    assert await store.count_active(["q2", "q3"]) == 1
    assert await store.count_active(["nothing"]) == 0


async def test_queue_depths_report_active_counts_per_queue_and_status(harness: Harness) -> None:
    """queue_depths reports every non-empty active (queue, status) with its exact count."""
    store = harness.store
    for _ in range(2):
        await enqueue(store, new_job(queue="q1"))
    await enqueue(store, new_job(queue="q1", scheduled_at=at(60)))
    await enqueue(store, new_job(queue="q2"))
    await claim_one(store, queues=["q2"], now=at(1))
    done = await enqueue_and_claim(store, new_job(queue="q2"), now=at(2))
    await succeed(store, done.lease, now=at(3))

    truth = {
        ("q1", JobStatus.PENDING): 2,
        ("q1", JobStatus.SCHEDULED): 1,
        ("q2", JobStatus.RUNNING): 1,
        ("q2", JobStatus.SUCCEEDED): 1,
    }
    reported = {(d.queue, d.status): d.count for d in await store.queue_depths()}
    for key, count in reported.items():
        assert count == truth.get(key, 0), key
    active = {k: v for k, v in reported.items() if v and k[1] not in TERMINAL}
    assert active == {k: v for k, v in truth.items() if k[1] not in TERMINAL}


async def test_queue_depths_report_the_earliest_due_time_per_queue_and_status(
    harness: Harness,
) -> None:
    """queue_depths gives each active (queue, status) the earliest scheduled_at of its jobs:
    for pending, since when the longest-waiting job has been due; for scheduled, when the
    next one falls due."""
    store = harness.store
    await enqueue(store, new_job(queue="q1"), now=at(5))
    await enqueue(store, new_job(queue="q1"), now=at(2))
    await enqueue(store, new_job(queue="q1"), now=at(9))
    await enqueue(store, new_job(queue="q1", scheduled_at=at(60)), now=at(1))
    await enqueue(store, new_job(queue="q1", scheduled_at=at(30)), now=at(1))
    await enqueue(store, new_job(queue="q2"), now=at(7))
    await claim_one(store, queues=["q2"], now=at(8))
    done = await enqueue_and_claim(store, new_job(queue="q3"), now=at(1))
    await succeed(store, done.lease, now=at(3))

    reported = {(d.queue, d.status): (d.count, d.oldest_due_at) for d in await store.queue_depths()}
    assert reported[("q1", JobStatus.PENDING)] == (3, at(2))
    assert reported[("q1", JobStatus.SCHEDULED)] == (2, at(30))
    assert reported[("q2", JobStatus.RUNNING)] == (1, at(7))
    assert ("q3", JobStatus.SUCCEEDED) not in reported
