"""A running job whose cancel was requested ends cancelled where it would wait again.

A cancel accepted for a running job (cancel_phase COOPERATIVE) is acted on by
the owner's heartbeat; an attempt that ends first in a retry, a snooze, a
RetryAfter, a release, a drain, a reclaim or an isolation must not put the
job back in line, where nothing acts on the request and it would run again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import pytest

from contracts.harness import Harness
from contracts.helpers import LEASE, TICK, at, claim, enqueue_and_claim, get, new_job, register
from taskq.domain.job import ClaimedJob
from taskq.domain.status import JobStatus
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import Isolation, ReclaimReport, Reschedule

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


PATHS: dict[str, _Path] = {
    "retry later": _retry_later,
    "retry due now": _retry_now,
    "snooze": _snooze,
    "retry after": _retry_after,
    "release": _release,
    "drain": _drain,
    "isolate": _isolate,
}


@pytest.mark.parametrize("path", PATHS.values(), ids=PATHS.keys())
async def test_a_cancel_requested_job_ends_cancelled_instead_of_waiting(
    harness: Harness, path: _Path
) -> None:
    """Each owner write or sweep that would re-wait the job makes it cancelled, finished now."""
    store = harness.store
    await register(store, "w1")
    claimed = await enqueue_and_claim(store, new_job(max_attempts=5))
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


async def test_a_job_without_a_cancel_request_still_waits_again(harness: Harness) -> None:
    """The cancel check keys on the request: another job's cancel changes nothing here."""
    store = harness.store
    other = await enqueue_and_claim(store, new_job("b"))
    claimed = await enqueue_and_claim(store, new_job(max_attempts=5))
    await store.request_cancel(other.id, now=at(2))
    await _retry_later(store, claimed, at(3))
    assert (await get(store, claimed.id)).status is JobStatus.SCHEDULED
