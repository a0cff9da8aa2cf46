"""JobCanceller.request_cancel and escalate_cancel: the persisted cancel phases."""

from __future__ import annotations

from datetime import timedelta

import pytest

from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import JobNotFound
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish, Heartbeat, RunningJobView
from taskq.testing.harness import Harness

from .helpers import at, claim, enqueue, enqueue_and_claim, get, new_job, register


async def test_cancel_of_a_pending_job_cancels_it_at_once(harness: Harness) -> None:
    """request_cancel on a pending job makes it cancelled, finished now, and never claimable."""
    store = harness.store
    job_id = await enqueue(store)
    assert await store.request_cancel(job_id, now=at(5)) is JobStatus.CANCELLED
    got = await get(store, job_id)
    assert got.status is JobStatus.CANCELLED
    assert got.finished_at == at(5)
    assert await claim(store, now=at(6)) == []
    assert await store.count_active() == 0


async def test_cancel_of_a_scheduled_job_cancels_it_at_once(harness: Harness) -> None:
    """request_cancel on a scheduled job makes it cancelled; promotion then ignores it."""
    store = harness.store
    job_id = await enqueue(store, new_job(scheduled_at=at(60)))
    assert await store.request_cancel(job_id, now=at(5)) is JobStatus.CANCELLED
    assert (await get(store, job_id)).status is JobStatus.CANCELLED
    assert await store.promote_scheduled(now=at(60)) == 0
    assert (await get(store, job_id)).status is JobStatus.CANCELLED


async def test_cancel_of_a_running_job_asks_cooperatively(harness: Harness) -> None:
    """Cancelling a running job persists phase COOPERATIVE, which the owner's heartbeat returns."""
    store = harness.store
    await register(store, "w1")
    claimed = await enqueue_and_claim(store)
    assert await store.request_cancel(claimed.id, now=at(5)) is JobStatus.RUNNING
    got = await get(store, claimed.id)
    assert got.status is JobStatus.RUNNING
    assert got.cancel_phase is CancelPhase.COOPERATIVE
    assert got.cancel_requested_at == at(5)
    assert got.fencing_token == claimed.fencing_token

    report = await store.heartbeat(
        Heartbeat(worker_id="w1", lease=timedelta(seconds=60), now=at(6))
    )
    assert report.running == (
        RunningJobView(
            lease=claimed.lease,
            cancel_phase=CancelPhase.COOPERATIVE,
            cancel_requested_at=at(5),
            started=True,
        ),
    )


async def test_repeated_cancel_keeps_the_first_request_time(harness: Harness) -> None:
    """A second request_cancel on a running job changes neither phase nor cancel_requested_at."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.request_cancel(claimed.id, now=at(5))
    assert await store.request_cancel(claimed.id, now=at(9)) is JobStatus.RUNNING
    got = await get(store, claimed.id)
    assert (got.cancel_phase, got.cancel_requested_at) == (CancelPhase.COOPERATIVE, at(5))


async def test_escalate_cancel_persists_forced(harness: Harness) -> None:
    """escalate_cancel persists FORCED, seen by the heartbeat and kept by later cancel requests."""
    store = harness.store
    await register(store, "w1")
    claimed = await enqueue_and_claim(store)
    await store.request_cancel(claimed.id, now=at(5))
    await store.escalate_cancel(claimed.lease, now=at(35))
    got = await get(store, claimed.id)
    assert got.cancel_phase is CancelPhase.FORCED
    assert got.status is JobStatus.RUNNING
    assert got.cancel_requested_at == at(5)
    report = await store.heartbeat(
        Heartbeat(worker_id="w1", lease=timedelta(seconds=60), now=at(36))
    )
    assert [v.cancel_phase for v in report.running] == [CancelPhase.FORCED]
    assert await store.request_cancel(claimed.id, now=at(40)) is JobStatus.RUNNING
    assert (await get(store, claimed.id)).cancel_phase is CancelPhase.FORCED


async def test_escalate_without_a_prior_request_persists_forced(harness: Harness) -> None:
    """escalate_cancel works on a job nobody asked to cancel (shutdown forcing)."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.escalate_cancel(claimed.lease, now=at(3))
    assert (await get(store, claimed.id)).cancel_phase is CancelPhase.FORCED


@pytest.mark.parametrize(
    "status", [JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.ABANDONED], ids=str
)
async def test_cancel_of_a_finished_job_changes_nothing(
    harness: Harness, status: JobStatus
) -> None:
    """request_cancel on a terminal job returns its status and leaves it untouched."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.finish(Finish(lease=claimed.lease, status=status, now=at(2)))
    before = await get(store, claimed.id)
    assert await store.request_cancel(claimed.id, now=at(3)) is status
    assert await get(store, claimed.id) == before


async def test_cancel_of_an_unknown_job_raises_job_not_found(harness: Harness) -> None:
    """request_cancel on an id that does not exist raises JobNotFound carrying the id."""
    known = await enqueue(harness.store)
    with pytest.raises(JobNotFound) as missing:
        await harness.store.request_cancel(known + 1000, now=at(1))
    assert missing.value.job_id == known + 1000


async def test_cancelled_running_job_can_still_be_finished_by_its_owner(harness: Harness) -> None:
    """A cancel request does not take the lease away: the owner still writes the outcome."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.request_cancel(claimed.id, now=at(5))
    await store.finish(Finish(lease=claimed.lease, status=JobStatus.CANCELLED, now=at(6)))
    got = await get(store, claimed.id)
    assert (got.status, got.finished_at) == (JobStatus.CANCELLED, at(6))
