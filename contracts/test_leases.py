"""Leases and fencing: claim fields, expiry and reclaim, stale-owner writes rejected."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import pytest

from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import LeaseLost
from taskq.domain.job import Lease
from taskq.domain.status import JobStatus
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import Finish, ReclaimReport, Reschedule
from taskq.testing.harness import Harness

from .helpers import (
    LEASE,
    TICK,
    at,
    claim,
    claim_one,
    enqueue,
    enqueue_and_claim,
    get,
    ids_of,
    new_job,
)


async def test_claim_marks_the_job_running_under_a_lease(harness: Harness) -> None:
    """A claim makes the job running, locked by the worker until now + lease, attempt 1."""
    store = harness.store
    job = new_job(
        queue="q1",
        payload={"p": [1, 2]},
        priority=4,
        max_attempts=5,
        schedule_to_close=at(999),
        fairness_key="f",
        metadata={"m": 1},
        trace_id="t",
        span_id="s",
    )
    job_id = await enqueue(store, job, now=at(1))
    before = await get(store, job_id)
    claimed = await claim_one(store, queues=["q1"], now=at(5), lease=timedelta(seconds=30))
    assert claimed.id == job_id
    assert (claimed.queue, claimed.actor, claimed.priority) == ("q1", "a", 4)
    assert dict(claimed.payload) == {"p": [1, 2]}
    assert claimed.attempt == 1
    assert claimed.max_attempts == 5
    assert claimed.scheduled_at == at(1)
    assert claimed.lock_expires_at == at(35)
    assert claimed.schedule_to_close == at(999)
    assert claimed.fairness_key == "f"
    assert dict(claimed.metadata) == {"m": 1}
    assert (claimed.trace_id, claimed.span_id) == ("t", "s")
    assert claimed.fencing_token != before.fencing_token
    assert claimed.lease == Lease(job_id, claimed.fencing_token)

    got = await get(store, job_id)
    assert got.status is JobStatus.RUNNING
    assert got.locked_by == "w1"
    assert got.lock_expires_at == at(35)
    assert got.attempt == 1
    assert got.fencing_token == claimed.fencing_token
    assert got.started_at is None
    assert got.cancel_phase is CancelPhase.NONE


async def test_mark_started_records_started_at(harness: Harness) -> None:
    """mark_started stamps started_at on owned jobs and reports no lost leases."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    assert await store.mark_started([claimed.lease], now=at(3)) == []
    got = await get(store, claimed.id)
    assert got.started_at == at(3)
    assert got.status is JobStatus.RUNNING


async def test_mark_started_returns_leases_no_longer_held(harness: Harness) -> None:
    """mark_started returns exactly the leases no longer held and leaves those jobs alone."""
    store = harness.store
    kept = await enqueue_and_claim(store, lease=timedelta(seconds=100), started=False)
    lost = await enqueue_and_claim(store, lease=timedelta(seconds=10), started=False)
    await store.reclaim_expired(now=at(11))
    returned = await store.mark_started([kept.lease, lost.lease], now=at(12))
    assert returned == [lost.lease]
    assert (await get(store, kept.id)).started_at == at(12)
    lost_job = await get(store, lost.id)
    assert lost_job.status is JobStatus.PENDING
    assert lost_job.started_at is None


async def test_lease_is_not_reclaimed_until_it_has_expired(harness: Harness) -> None:
    """reclaim_expired leaves a job whose lock_expires_at is not before now."""
    store = harness.store
    claimed = await enqueue_and_claim(store, lease=LEASE)
    assert await store.reclaim_expired(now=claimed.lock_expires_at - TICK) == ReclaimReport()
    assert await store.reclaim_expired(now=claimed.lock_expires_at) == ReclaimReport()
    got = await get(store, claimed.id)
    assert got.status is JobStatus.RUNNING
    assert got.fencing_token == claimed.fencing_token


async def test_expired_lease_is_reclaimed_to_pending(harness: Harness) -> None:
    """A lease expired before now is re-pended with an attempt record; its next claim is fresh."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=3))
    report = await store.reclaim_expired(now=claimed.lock_expires_at + TICK)
    assert report == ReclaimReport(repended=(claimed.id,))
    got = await get(store, claimed.id)
    assert got.status is JobStatus.PENDING
    attempts = await store.attempts(claimed.id)
    assert len(attempts) == 1
    assert (attempts[0].job_id, attempts[0].attempt) == (claimed.id, 1)
    assert attempts[0].worker_id == "w1"
    assert attempts[0].finished_at == claimed.lock_expires_at + TICK

    again = await claim_one(store, worker="w2", now=at(100))
    assert again.id == claimed.id
    assert again.attempt == 2
    assert again.fencing_token != claimed.fencing_token
    assert (await get(store, claimed.id)).locked_by == "w2"


async def test_expired_lease_crashes_when_attempts_are_used_up(harness: Harness) -> None:
    """A lease that expires on the job's last attempt makes it crashed, not pending."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=1))
    now = claimed.lock_expires_at + TICK
    assert await store.reclaim_expired(now=now) == ReclaimReport(crashed=(claimed.id,))
    got = await get(store, claimed.id)
    assert got.status is JobStatus.CRASHED
    assert got.finished_at == now
    assert len(await store.attempts(claimed.id)) == 1
    assert await claim(store, now=now) == []


async def test_an_expired_unstarted_job_waits_again_with_its_attempt_kept(
    harness: Harness,
) -> None:
    """A claimed-ahead job whose worker died before starting it is re-pended where it was in
    line, its attempt refunded and no attempt recorded: it never ran."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=3), started=False)
    report = await store.reclaim_expired(now=claimed.lock_expires_at + TICK)
    assert report == ReclaimReport(repended=(claimed.id,), unstarted=(claimed.id,))
    got = await get(store, claimed.id)
    assert (got.status, got.attempt, got.scheduled_at, got.started_at) == (
        JobStatus.PENDING,
        0,
        at(0),
        None,
    )
    assert await store.attempts(claimed.id) == []
    assert got.metadata == {"reclaimed_unstarted": 1}
    again = await claim_one(store, worker="w2", now=at(100))
    assert (again.attempt, again.reclaimed_unstarted) == (1, 1)


async def test_an_expired_unstarted_job_on_its_last_attempt_is_not_crashed(
    harness: Harness,
) -> None:
    """max_attempts 1 (a non-retryable job): never started, it is re-pended, not crashed;
    started, its expiry crashes it, so it never runs twice."""
    store = harness.store
    unstarted = await enqueue_and_claim(store, new_job("a", max_attempts=1), started=False)
    started = await enqueue_and_claim(store, new_job("b", max_attempts=1))
    report = await store.reclaim_expired(now=at(0) + LEASE + TICK)
    assert report == ReclaimReport(
        repended=(unstarted.id,), crashed=(started.id,), unstarted=(unstarted.id,)
    )
    assert (await get(store, unstarted.id)).status is JobStatus.PENDING
    assert (await get(store, started.id)).status is JobStatus.CRASHED


async def test_each_unstarted_reclaim_counts_in_the_metadata(harness: Harness) -> None:
    """reclaimed_unstarted counts every unstarted reclaim and keeps the job's own metadata;
    a started reclaim leaves it as it is."""
    store = harness.store
    claimed = await enqueue_and_claim(
        store, new_job(max_attempts=None, metadata={"tenant": "t1"}), started=False
    )
    short = timedelta(seconds=10)
    for round_no in range(1, 3):
        now = at(100 * round_no)
        report = await store.reclaim_expired(now=now)
        assert report.unstarted == (claimed.id,)
        again = await claim_one(store, now=now, lease=short, start_now=1 if round_no == 2 else 0)
        assert again.reclaimed_unstarted == round_no
    assert (await store.reclaim_expired(now=at(300))).unstarted == ()
    got = await get(store, claimed.id)
    assert got.metadata == {"tenant": "t1", "reclaimed_unstarted": 2}


async def test_a_marked_job_counts_as_started_at_reclaim(harness: Harness) -> None:
    """A job claimed ahead and then marked started (its consumer took it) counts its attempt."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=1), started=False)
    assert await store.mark_started([claimed.lease], now=at(1)) == []
    report = await store.reclaim_expired(now=claimed.lock_expires_at + TICK)
    assert report == ReclaimReport(crashed=(claimed.id,))


async def test_reclaim_counts_attempts_across_claims(harness: Harness) -> None:
    """With max_attempts 2, the first expiry re-pends and the second crashes."""
    store = harness.store
    first = await enqueue_and_claim(store, new_job(max_attempts=2), lease=timedelta(seconds=10))
    assert await store.reclaim_expired(now=at(11)) == ReclaimReport(repended=(first.id,))
    second = await claim_one(store, now=at(12), lease=timedelta(seconds=10), start_now=1)
    assert second.attempt == 2
    assert await store.reclaim_expired(now=at(23)) == ReclaimReport(crashed=(first.id,))
    assert [a.attempt for a in await store.attempts(first.id)] == [1, 2]


async def test_unbounded_attempts_always_repend(harness: Harness) -> None:
    """A job with max_attempts None is re-pended by every reclaim."""
    store = harness.store
    first = await enqueue_and_claim(store, new_job(max_attempts=None), lease=timedelta(seconds=10))
    tokens = {first.fencing_token}
    for round_no in range(1, 5):
        now = at(20 * round_no)
        assert await store.reclaim_expired(now=now) == ReclaimReport(repended=(first.id,))
        again = await claim_one(store, now=now, lease=timedelta(seconds=10), start_now=1)
        assert again.attempt == round_no + 1
        tokens.add(again.fencing_token)
    assert len(tokens) == 5


async def test_reclaim_touches_only_expired_running_jobs(harness: Harness) -> None:
    """reclaim_expired ignores waiting, finished and unexpired running jobs."""
    store = harness.store
    expired = await enqueue_and_claim(store, lease=timedelta(seconds=10))
    fresh = await enqueue_and_claim(store, lease=timedelta(seconds=100))
    done = await enqueue_and_claim(store, lease=timedelta(seconds=10))
    await store.finish(Finish(lease=done.lease, status=JobStatus.SUCCEEDED, now=at(1)))
    waiting = await enqueue(store, new_job(scheduled_at=at(5)))
    pending = await enqueue(store, now=at(2))
    report = await store.reclaim_expired(now=at(50))
    assert report == ReclaimReport(repended=(expired.id,))
    assert (await get(store, fresh.id)).status is JobStatus.RUNNING
    assert (await get(store, done.id)).status is JobStatus.SUCCEEDED
    assert (await get(store, waiting)).status is JobStatus.SCHEDULED
    assert (await get(store, pending)).status is JobStatus.PENDING


# --- stale-owner writes ------------------------------------------------------------------

StaleWrite = Callable[[QueueStore, Lease, datetime], Awaitable[None]]


async def _finish(store: QueueStore, lease: Lease, now: datetime) -> None:
    await store.finish(Finish(lease=lease, status=JobStatus.SUCCEEDED, result={"r": 1}, now=now))


async def _reschedule(store: QueueStore, lease: Lease, now: datetime) -> None:
    request = Reschedule(
        lease=lease, run_at=now + timedelta(seconds=30), error="boom", error_class="E", now=now
    )
    await store.reschedule(request)


async def _release(store: QueueStore, lease: Lease, now: datetime) -> None:
    await store.release(lease, delay=timedelta(seconds=10), now=now)


async def _escalate(store: QueueStore, lease: Lease, now: datetime) -> None:
    await store.escalate_cancel(lease, now=now)


WRITES: dict[str, StaleWrite] = {
    "finish": _finish,
    "reschedule": _reschedule,
    "release": _release,
    "escalate_cancel": _escalate,
}

Scenario = Callable[[QueueStore], Awaitable[Lease]]


async def _reclaimed_and_reclaimed(store: QueueStore) -> Lease:
    old = await enqueue_and_claim(store, lease=timedelta(seconds=10))
    await store.reclaim_expired(now=at(11))
    new = await claim_one(store, worker="w2", now=at(12))
    assert new.id == old.id
    return old.lease


async def _reclaimed_and_waiting(store: QueueStore) -> Lease:
    old = await enqueue_and_claim(store, lease=timedelta(seconds=10))
    await store.reclaim_expired(now=at(11))
    return old.lease


async def _already_finished(store: QueueStore) -> Lease:
    claimed = await enqueue_and_claim(store)
    await store.finish(Finish(lease=claimed.lease, status=JobStatus.FAILED, error="x", now=at(1)))
    return claimed.lease


async def _never_existed(store: QueueStore) -> Lease:
    claimed = await enqueue_and_claim(store)
    return Lease(claimed.id + 1000, claimed.fencing_token)


SCENARIOS: dict[str, Scenario] = {
    "reclaimed-by-another": _reclaimed_and_reclaimed,
    "reclaimed-waiting": _reclaimed_and_waiting,
    "already-finished": _already_finished,
    "unknown-job": _never_existed,
}


@pytest.mark.parametrize("write", list(WRITES.values()), ids=list(WRITES))
@pytest.mark.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))
async def test_stale_owner_write_raises_lease_lost_and_changes_nothing(
    harness: Harness, scenario: Scenario, write: StaleWrite
) -> None:
    """An owner write with a lease that is no longer held raises LeaseLost and changes nothing."""
    store = harness.store
    stale = await scenario(store)
    before = await store.get(stale.job_id)
    attempts_before = await store.attempts(stale.job_id)
    with pytest.raises(LeaseLost) as lost:
        await write(store, stale, at(20))
    assert (lost.value.job_id, lost.value.fencing_token) == (stale.job_id, stale.fencing_token)
    assert await store.get(stale.job_id) == before
    assert await store.attempts(stale.job_id) == attempts_before


async def test_finish_many_applies_owned_leases_and_returns_lost_ones(harness: Harness) -> None:
    """finish_many finishes every owned job and returns the leases it no longer held, untouched."""
    store = harness.store
    owned_1 = await enqueue_and_claim(store, lease=timedelta(seconds=100))
    stolen = await enqueue_and_claim(store, lease=timedelta(seconds=10))
    owned_2 = await enqueue_and_claim(store, lease=timedelta(seconds=100))
    await store.reclaim_expired(now=at(11))
    assert (await claim_one(store, worker="w2", now=at(12))).id == stolen.id
    stolen_before = await get(store, stolen.id)

    lost = await store.finish_many(
        [
            Finish(lease=owned_1.lease, status=JobStatus.SUCCEEDED, result=1, now=at(20)),
            Finish(lease=stolen.lease, status=JobStatus.SUCCEEDED, result=2, now=at(20)),
            Finish(lease=owned_2.lease, status=JobStatus.FAILED, error="bad", now=at(20)),
        ]
    )
    assert lost == [stolen.lease]
    assert ids_of(lost) == {stolen.id}
    one = await get(store, owned_1.id)
    assert (one.status, one.result, one.finished_at) == (JobStatus.SUCCEEDED, 1, at(20))
    two = await get(store, owned_2.id)
    assert (two.status, two.last_error, two.finished_at) == (JobStatus.FAILED, "bad", at(20))
    assert await get(store, stolen.id) == stolen_before


async def test_every_claim_issues_a_new_fencing_token(harness: Harness) -> None:
    """Claims after reclaim, release, drain and retry each issue a token the job never had."""
    store = harness.store
    job_id = await enqueue(store, new_job(max_attempts=None))
    tokens = [(await get(store, job_id)).fencing_token]

    c1 = await claim_one(store, now=at(1), lease=timedelta(seconds=10))
    await store.reclaim_expired(now=at(12))
    c2 = await claim_one(store, now=at(13))
    await store.release(c2.lease, delay=timedelta(seconds=1), now=at(14))
    assert await store.promote_scheduled(now=at(15)) == 1
    c3 = await claim_one(store, now=at(15))
    assert await store.drain_unstarted("w1", now=at(16)) == 1
    c4 = await claim_one(store, now=at(17))
    await store.reschedule(Reschedule(lease=c4.lease, run_at=at(18), now=at(18)))
    c5 = await claim_one(store, now=at(19))
    tokens += [c.fencing_token for c in (c1, c2, c3, c4, c5)]
    assert len(set(tokens)) == len(tokens), tokens
