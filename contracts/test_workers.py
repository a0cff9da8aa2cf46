"""WorkerRegistry: registration, the heartbeat transaction, stale-worker cleanup, isolation."""

from __future__ import annotations

from datetime import timedelta

import pytest

from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.status import JobStatus
from taskq.ports.store_params import (
    Finish,
    Heartbeat,
    Isolation,
    ReclaimReport,
    RunningJobView,
    WorkerRecord,
)
from taskq.testing.harness import Harness

from .helpers import (
    at,
    claim,
    claim_one,
    enqueue,
    enqueue_and_claim,
    get,
    new_job,
    register,
)

LEASE_60 = timedelta(seconds=60)


async def test_registered_worker_is_listed(harness: Harness) -> None:
    """register_worker stores the worker, listed with started_at and last_seen_at = now."""
    store = harness.store
    await register(store, "w1", queues=("default", "q2"), now=at(3), label="api")
    assert await store.list_workers() == [
        WorkerRecord(
            worker_id="w1",
            hostname="contract-host",
            pid=4242,
            queues=("default", "q2"),
            started_at=at(3),
            last_seen_at=at(3),
            worker_label="api",
        )
    ]


async def test_deregistered_worker_is_gone(harness: Harness) -> None:
    """deregister_worker removes only that worker."""
    store = harness.store
    await register(store, "w1")
    await register(store, "w2")
    await store.deregister_worker("w1")
    assert [w.worker_id for w in await store.list_workers()] == ["w2"]


async def test_heartbeat_sets_last_seen(harness: Harness) -> None:
    """A heartbeat moves the worker's last_seen_at to now and leaves started_at."""
    store = harness.store
    await register(store, "w1", now=at(0))
    await register(store, "w2", now=at(0))
    await store.heartbeat(Heartbeat(worker_id="w1", lease=LEASE_60, now=at(10)))
    seen = {w.worker_id: (w.started_at, w.last_seen_at) for w in await store.list_workers()}
    assert seen == {"w1": (at(0), at(10)), "w2": (at(0), at(0))}


async def test_heartbeat_extends_only_the_workers_own_jobs(harness: Harness) -> None:
    """A heartbeat extends lock_expires_at to now + lease for this worker's running jobs only."""
    store = harness.store
    await register(store, "w1")
    await register(store, "w2")
    for _ in range(3):
        await enqueue(store)
    mine = await claim(store, worker="w1", limit=2, now=at(1))
    [theirs] = await claim(store, worker="w2", limit=1, now=at(1))
    await store.mark_started([mine[0].lease], now=at(2))

    report = await store.heartbeat(
        Heartbeat(worker_id="w1", lease=timedelta(seconds=90), now=at(50))
    )
    assert sorted(report.running, key=lambda v: v.lease.job_id) == [
        RunningJobView(
            lease=mine[0].lease,
            cancel_phase=CancelPhase.NONE,
            cancel_requested_at=None,
            started=True,
        ),
        RunningJobView(
            lease=mine[1].lease,
            cancel_phase=CancelPhase.NONE,
            cancel_requested_at=None,
            started=False,
        ),
    ]
    for job in mine:
        assert (await get(store, job.id)).lock_expires_at == at(140)
    assert (await get(store, theirs.id)).lock_expires_at == theirs.lock_expires_at


async def test_heartbeat_keeps_a_late_but_unreclaimed_lease(harness: Harness) -> None:
    """A heartbeat after lock_expires_at but before any reclaim still extends the owned job."""
    store = harness.store
    await register(store, "w1")
    claimed = await enqueue_and_claim(store, lease=timedelta(seconds=10))
    report = await store.heartbeat(Heartbeat(worker_id="w1", lease=LEASE_60, now=at(15)))
    assert [v.lease for v in report.running] == [claimed.lease]
    assert (await get(store, claimed.id)).lock_expires_at == at(75)
    assert await store.reclaim_expired(now=at(20)) == ReclaimReport()


async def test_heartbeat_lets_the_leases_it_is_told_to_lapse(harness: Harness) -> None:
    """Leases in ``let_lapse`` are reported but not extended; the sweep then reclaims them."""
    store = harness.store
    await register(store, "w1")
    for _ in range(2):
        await enqueue(store)
    kept, lapsing = await claim(store, worker="w1", limit=2, now=at(1))
    beat = Heartbeat(worker_id="w1", lease=LEASE_60, now=at(30), let_lapse=(lapsing.lease,))
    report = await store.heartbeat(beat)
    assert sorted((v.lease for v in report.running), key=lambda lease: lease.job_id) == [
        kept.lease,
        lapsing.lease,
    ]
    assert (await get(store, kept.id)).lock_expires_at == at(90)
    assert (await get(store, lapsing.id)).lock_expires_at == lapsing.lock_expires_at
    reclaimed = await store.reclaim_expired(now=at(62))
    assert reclaimed.repended == (lapsing.id,)
    assert (await get(store, kept.id)).status is JobStatus.RUNNING


async def test_heartbeat_let_lapse_matches_the_fencing_token(harness: Harness) -> None:
    """A stale lease in ``let_lapse`` (the job was reclaimed and claimed again) is extended."""
    store = harness.store
    await register(store, "w1")
    old = await enqueue_and_claim(store, lease=timedelta(seconds=10))
    await store.reclaim_expired(now=at(11))
    again = await claim_one(store, worker="w1", now=at(12))
    assert again.id == old.id
    beat = Heartbeat(worker_id="w1", lease=LEASE_60, now=at(13), let_lapse=(old.lease,))
    report = await store.heartbeat(beat)
    assert [v.lease for v in report.running] == [again.lease]
    assert (await get(store, again.id)).lock_expires_at == at(73)


async def test_heartbeat_does_not_report_jobs_now_owned_by_another(harness: Harness) -> None:
    """After the job is reclaimed by another, the old owner's heartbeat ignores it."""
    store = harness.store
    await register(store, "w1")
    await register(store, "w2")
    await enqueue_and_claim(store, lease=timedelta(seconds=10))
    await store.reclaim_expired(now=at(11))
    stolen = await claim_one(store, worker="w2", now=at(12))
    report = await store.heartbeat(Heartbeat(worker_id="w1", lease=LEASE_60, now=at(13)))
    assert report.running == ()
    assert (await get(store, stolen.id)).lock_expires_at == stolen.lock_expires_at


async def test_heartbeat_ignores_finished_jobs(harness: Harness) -> None:
    """Jobs the worker already finished are not in its heartbeat report."""
    store = harness.store
    await register(store, "w1")
    done = await enqueue_and_claim(store)
    await store.finish(Finish(lease=done.lease, status=JobStatus.SUCCEEDED, now=at(1)))
    report = await store.heartbeat(Heartbeat(worker_id="w1", lease=LEASE_60, now=at(2)))
    assert report.running == ()


async def test_stale_workers_are_cleaned_up(harness: Harness) -> None:
    """cleanup_stale_workers removes and returns workers not seen for stale_after."""
    store = harness.store
    await register(store, "old", now=at(0))
    await register(store, "fresh", now=at(0))
    await store.heartbeat(Heartbeat(worker_id="fresh", lease=LEASE_60, now=at(100)))
    removed = await store.cleanup_stale_workers(stale_after=timedelta(seconds=60), now=at(120))
    assert removed == ["old"]
    assert [w.worker_id for w in await store.list_workers()] == ["fresh"]
    assert await store.cleanup_stale_workers(stale_after=timedelta(seconds=60), now=at(120)) == []


async def test_isolate_worker_hands_back_each_job_by_its_kind(harness: Harness) -> None:
    """isolate_worker: an unstarted job waits again where it was, attempt kept, nothing
    recorded; a started job of a retryable actor waits until retry_at with its attempt
    refunded (on its last attempt too) and an interrupted record; any other started job
    crashes. Other workers' jobs are untouched."""
    store = harness.store
    await register(store, "w1")
    await register(store, "w2")
    retry = await enqueue(store, new_job("r", max_attempts=3))
    last = await enqueue(store, new_job("r", max_attempts=1))
    fatal = await enqueue(store, new_job("n", max_attempts=3))
    ahead = await enqueue(store, new_job("n", max_attempts=1))
    claimed = await claim(store, worker="w1", actors=["r", "n"], now=at(1), start_now=3)
    assert [c.id for c in claimed] == [retry, last, fatal, ahead]
    assert [c.started for c in claimed] == [True, True, True, False]
    other = await enqueue(store, new_job("r"), now=at(1))
    assert (await claim_one(store, worker="w2", actors=["r"], now=at(1), start_now=1)).id == other

    affected = await store.isolate_worker(
        Isolation(worker_id="w1", retryable_actors=["r"], retry_at=at(15), now=at(10))
    )
    assert sorted(affected) == sorted([retry, last, fatal, ahead])

    for job_id in (retry, last):
        waiting = await get(store, job_id)
        assert (waiting.status, waiting.scheduled_at, waiting.attempt) == (
            JobStatus.SCHEDULED,
            at(15),
            0,
        )
        [record] = await store.attempts(job_id)
        assert (record.outcome, record.error_class, record.attempt) == (
            "interrupted",
            "HeartbeatLost",
            1,
        )
    crashed = await get(store, fatal)
    assert (crashed.status, crashed.finished_at) == (JobStatus.CRASHED, at(10))
    [record] = await store.attempts(fatal)
    assert (record.outcome, record.error_class) == ("crashed", "HeartbeatLost")
    assert (record.worker_id, record.finished_at) == ("w1", at(10))
    repended = await get(store, ahead)
    assert (repended.status, repended.scheduled_at, repended.attempt) == (
        JobStatus.PENDING,
        at(0),
        0,
    )
    assert await store.attempts(ahead) == []
    assert (await get(store, other)).status is JobStatus.RUNNING
    assert await store.attempts(other) == []


async def test_isolate_worker_records_the_reason_it_is_given(harness: Harness) -> None:
    """An isolation for another reason (a hard exit) records that error class and message."""
    store = harness.store
    await register(store, "w1")
    claimed = await enqueue_and_claim(store, new_job("r"))
    request = Isolation(
        worker_id="w1",
        retryable_actors=["r"],
        retry_at=at(5),
        error_class="WorkerShutdown",
        error="third signal: the worker left at once",
        now=at(2),
    )
    assert await store.isolate_worker(request) == [claimed.id]
    [record] = await store.attempts(claimed.id)
    assert (record.outcome, record.error_class, record.error) == (
        "interrupted",
        "WorkerShutdown",
        "third signal: the worker left at once",
    )
    assert (await get(store, claimed.id)).last_error == (
        "WorkerShutdown: third signal: the worker left at once"
    )


async def test_isolate_worker_with_no_jobs_affects_nothing(harness: Harness) -> None:
    """isolate_worker of a worker that owns nothing returns no ids."""
    await register(harness.store, "w1")
    await enqueue(harness.store)
    isolation = Isolation(worker_id="w1", retryable_actors=["a"], retry_at=at(5), now=at(1))
    assert await harness.store.isolate_worker(isolation) == []
    assert await harness.store.count_active() == 1


async def test_heartbeat_says_whether_the_workers_row_is_there(harness: Harness) -> None:
    """A worker removed as stale (paused past stale_after) learns it from its next heartbeat,
    which still extends its leases; registering again puts the row back."""
    store = harness.store
    lease = timedelta(seconds=60)
    await register(store, "w1", now=at(0))
    assert (await store.heartbeat(Heartbeat(worker_id="w1", lease=lease, now=at(1)))).registered
    claimed = await enqueue_and_claim(store, worker="w1", now=at(1))
    assert await store.cleanup_stale_workers(stale_after=timedelta(seconds=5), now=at(10)) == ["w1"]

    report = await store.heartbeat(Heartbeat(worker_id="w1", lease=lease, now=at(11)))
    assert report.registered is False
    assert [view.lease for view in report.running] == [claimed.lease]
    assert (await get(store, claimed.id)).lock_expires_at == at(11) + lease
    assert await store.list_workers() == []

    await register(store, "w1", now=at(12))
    assert [w.worker_id for w in await store.list_workers()] == ["w1"]
    again = await store.heartbeat(Heartbeat(worker_id="w1", lease=lease, now=at(13)))
    assert again.registered


async def test_heartbeat_of_a_worker_owning_nothing_reports_its_row(harness: Harness) -> None:
    """With no running job the report is empty and still says whether the row exists."""
    store = harness.store
    lease = timedelta(seconds=60)
    assert (await store.heartbeat(Heartbeat(worker_id="ghost", lease=lease))).registered is False
    await register(store, "w2")
    report = await store.heartbeat(Heartbeat(worker_id="w2", lease=lease))
    assert (report.running, report.registered) == ((), True)


async def test_heartbeat_with_a_timeout_answers_as_without(harness: Harness) -> None:
    """A heartbeat given a timeout it does not reach reports and extends as any other."""
    store = harness.store
    await register(store, "w1")
    claimed = await enqueue_and_claim(store, worker="w1", now=at(1))
    beat = Heartbeat(worker_id="w1", lease=LEASE_60, now=at(20), timeout=timedelta(seconds=30))
    report = await store.heartbeat(beat)
    assert ([v.lease for v in report.running], report.registered) == ([claimed.lease], True)
    assert (await get(store, claimed.id)).lock_expires_at == at(80)


@pytest.mark.parametrize("seconds", [0, -1])
async def test_heartbeat_refuses_a_timeout_that_is_not_positive(
    harness: Harness, seconds: float
) -> None:
    """A timeout of zero or less is refused (ValueError), nothing recorded."""
    store = harness.store
    await register(store, "w1", now=at(0))
    beat = Heartbeat(worker_id="w1", lease=LEASE_60, now=at(5), timeout=timedelta(seconds=seconds))
    with pytest.raises(ValueError, match="timeout"):
        await store.heartbeat(beat)
    assert [w.last_seen_at for w in await store.list_workers()] == [at(0)]
