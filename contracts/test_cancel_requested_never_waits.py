"""A running job whose cancel was requested ends cancelled where it would wait again.

A cancel accepted for a running job (cancel_phase COOPERATIVE) is acted on by
the owner's heartbeat; an attempt that ends first in a retry, a snooze, a
RetryAfter, a release, a drain, a reclaim, an isolation or an interruption must
not put the job back in line, where nothing acts on the request and it would run
again, nor end it any other way than cancelled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import pytest

from taskq.domain.job import ClaimedJob
from taskq.domain.status import JobStatus
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import Interruption, Isolation, ReclaimReport, Reschedule
from taskq.testing.harness import Harness

from .helpers import LEASE, TICK, at, claim, enqueue_and_claim, get, new_job, register

_Path = Callable[[QueueStore, ClaimedJob, datetime], Awaitable[None]]


async def _retry_later(store: QueueStore, job: ClaimedJob, now: datetime) -> None:
    await store.reschedule(Reschedule(lease=job.lease, run_at=at(60), error="boom", now=now))


async def _retry_now(store: QueueStore, job: ClaimedJob, now: datetime) -> None:
    await store.reschedule(Reschedule(lease=job.lease, run_at=now, error="boom", now=now))


async def _snooze(store: QueueStore, job: ClaimedJob, now: datetime) -> None:
    await store.reschedule(
        Reschedule(lease=job.lease, run_at=at(60), snooze=True, refund_attempt=True, now=now)
    )


async def _retry_after(store: QueueStore, job: ClaimedJob, now: datetime) -> None:
    await store.reschedule(Reschedule(lease=job.lease, run_at=at(60), refund_attempt=True, now=now))


async def _release(store: QueueStore, job: ClaimedJob, now: datetime) -> None:
    await store.release(job.lease, delay=timedelta(0), now=now)


async def _drain(store: QueueStore, job: ClaimedJob, now: datetime) -> None:
    assert await store.drain_unstarted("w1", now=now) == 1


async def _isolate(store: QueueStore, job: ClaimedJob, now: datetime) -> None:
    request = Isolation(worker_id="w1", retryable_actors=["a"], retry_at=now, now=now)
    assert await store.isolate_worker(request) == [job.id]


async def _isolate_not_retryable(store: QueueStore, job: ClaimedJob, now: datetime) -> None:
    request = Isolation(worker_id="w1", retryable_actors=[], retry_at=now, now=now)
    assert await store.isolate_worker(request) == [job.id]


async def _interrupt(store: QueueStore, job: ClaimedJob, now: datetime) -> None:
    await store.interrupt(
        Interruption(
            lease=job.lease, retryable=True, run_at=now, error_class="X", error="x", now=now
        )
    )


async def _interrupt_not_retryable(store: QueueStore, job: ClaimedJob, now: datetime) -> None:
    await store.interrupt(
        Interruption(
            lease=job.lease, retryable=False, run_at=now, error_class="X", error="x", now=now
        )
    )


#: Each path, and whether the job it acts on had started (a drain takes only unstarted ones).
PATHS: dict[str, tuple[_Path, bool]] = {
    "retry later": (_retry_later, True),
    "retry due now": (_retry_now, True),
    "snooze": (_snooze, True),
    "retry after": (_retry_after, True),
    "release": (_release, True),
    "drain": (_drain, False),
    "isolate": (_isolate, True),
    "isolate unstarted": (_isolate, False),
    "isolate not retryable": (_isolate_not_retryable, True),
    "interrupt": (_interrupt, True),
    "interrupt not retryable": (_interrupt_not_retryable, True),
}


@pytest.mark.parametrize(("path", "started"), PATHS.values(), ids=PATHS.keys())
async def test_a_cancel_requested_job_ends_cancelled_instead_of_waiting(
    harness: Harness, path: _Path, started: bool
) -> None:
    """Each owner write or sweep that would re-wait or otherwise end the job makes it
    cancelled, finished now."""
    store = harness.store
    await register(store, "w1")
    claimed = await enqueue_and_claim(store, new_job(max_attempts=5), started=started)
    assert await store.request_cancel(claimed.id, now=at(2)) is JobStatus.RUNNING
    await path(store, claimed, at(3))
    got = await get(store, claimed.id)
    assert (got.status, got.finished_at, got.locked_by) == (JobStatus.CANCELLED, at(3), None)
    assert await store.promote_scheduled(now=at(100)) == 0
    assert await claim(store, now=at(100)) == []
    assert await store.count_active() == 0


async def test_an_expired_lease_of_a_cancel_requested_job_ends_cancelled(harness: Harness) -> None:
    """reclaim_expired reports the job cancelled, not re-pended; its attempt is recorded."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=5))
    await store.request_cancel(claimed.id, now=at(2))
    now = at(0) + LEASE + TICK
    assert await store.reclaim_expired(now=now) == ReclaimReport(cancelled=(claimed.id,))
    got = await get(store, claimed.id)
    assert (got.status, got.finished_at) == (JobStatus.CANCELLED, now)
    assert [r.outcome for r in await store.attempts(claimed.id)] == ["lease_expired"]
    assert await claim(store, now=now) == []


async def test_an_expired_lease_of_an_unstarted_cancel_requested_job_ends_cancelled(
    harness: Harness,
) -> None:
    """A claimed-ahead job whose cancel was requested ends cancelled at reclaim, no attempt
    recorded (it never ran)."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=5), started=False)
    await store.request_cancel(claimed.id, now=at(2))
    now = at(0) + LEASE + TICK
    report = await store.reclaim_expired(now=now)
    assert report == ReclaimReport(cancelled=(claimed.id,), unstarted=(claimed.id,))
    assert (await get(store, claimed.id)).status is JobStatus.CANCELLED
    assert await store.attempts(claimed.id) == []


async def test_a_job_without_a_cancel_request_still_waits_again(harness: Harness) -> None:
    """The cancel check keys on the request: another job's cancel changes nothing here."""
    store = harness.store
    other = await enqueue_and_claim(store, new_job("b"))
    claimed = await enqueue_and_claim(store, new_job(max_attempts=5))
    await store.request_cancel(other.id, now=at(2))
    await _retry_later(store, claimed, at(3))
    assert (await get(store, claimed.id)).status is JobStatus.SCHEDULED
