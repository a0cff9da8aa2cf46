"""JobAdmin: the operator's job list, the retry of a finished job, and the worker overview."""

from __future__ import annotations

import asyncio

import pytest

from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import JobNotFound, JobNotRetryable
from taskq.domain.status import OPERATOR_RETRYABLE, JobStatus, retry_refusal
from taskq.ports.store_params import (
    CAP_LISTEN_NOTIFY,
    Finish,
    Heartbeat,
    JobQuery,
    WorkerInfo,
)
from taskq.testing.harness import Harness

from .helpers import (
    LEASE,
    Inbox,
    at,
    claim_one,
    enqueue,
    enqueue_and_claim,
    get,
    new_job,
    register,
)

FINISHED_BUT_NOT_SUCCEEDED = sorted(OPERATOR_RETRYABLE)


async def test_list_jobs_filters_by_status_actor_and_queue_newest_first(harness: Harness) -> None:
    """list_jobs returns the jobs matching every filter given, newest first, at most limit."""
    store = harness.store
    a1 = await enqueue(store, new_job("a"))
    b1 = await enqueue(store, new_job("b", queue="q2"))
    a2 = await enqueue(store, new_job("a", queue="q2"))
    running = await claim_one(store, queues=["default"], actors=["a"])
    assert running.id == a1
    await store.finish(Finish(lease=running.lease, status=JobStatus.FAILED, error="boom"))

    assert [j.id for j in await store.list_jobs(JobQuery())] == [a2, b1, a1]
    assert [j.id for j in await store.list_jobs(JobQuery(status=JobStatus.FAILED))] == [a1]
    assert [j.id for j in await store.list_jobs(JobQuery(actor="a"))] == [a2, a1]
    assert [j.id for j in await store.list_jobs(JobQuery(queue="q2"))] == [a2, b1]
    both = JobQuery(actor="a", queue="q2", status=JobStatus.PENDING)
    assert [j.id for j in await store.list_jobs(both)] == [a2]
    assert [j.id for j in await store.list_jobs(JobQuery(limit=2))] == [a2, b1]
    assert await store.list_jobs(JobQuery(actor="nobody")) == []
    listed = (await store.list_jobs(JobQuery(status=JobStatus.FAILED)))[0]
    assert listed == await get(store, a1)


@pytest.mark.parametrize("ended", FINISHED_BUT_NOT_SUCCEEDED, ids=lambda s: s.value)
async def test_retry_puts_a_finished_job_back_to_pending_for_one_more_attempt(
    harness: Harness, ended: JobStatus
) -> None:
    """A failed, cancelled, crashed or abandoned job retried is pending at now, lease, start,
    finish and result cleared; its attempt count, history and last error kept; the next claim
    is the next attempt with a new fencing token."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(max_attempts=1))
    await store.finish(
        Finish(lease=claimed.lease, status=ended, error="boom", error_class="E", now=at(1))
    )
    before = await store.attempts(claimed.id)

    retried = await store.retry_job(claimed.id, now=at(5))

    assert retried == await get(store, claimed.id)
    assert retried.status is JobStatus.PENDING
    assert retried.scheduled_at == at(5)
    assert retried.attempt == 1
    assert (retried.started_at, retried.finished_at) == (None, None)
    assert (retried.locked_by, retried.lock_expires_at) == (None, None)
    assert (retried.result, retried.result_expires_at) == (None, None)
    assert (retried.cancel_phase, retried.cancel_requested_at) == (CancelPhase.NONE, None)
    assert "boom" in (retried.last_error or "")
    assert await store.attempts(claimed.id) == before
    assert await store.count_active() == 1

    again = await claim_one(store, now=at(6))
    assert (again.id, again.attempt) == (claimed.id, 2)
    assert again.fencing_token > claimed.fencing_token


@pytest.mark.taskq_ports("queue_store", "notifier")
@pytest.mark.taskq_requires(CAP_LISTEN_NOTIFY)
async def test_retry_wakes_listeners_for_the_jobs_queue(harness: Harness) -> None:
    """A retried job is due at once, so listeners are woken for its queue (or any queue), as
    an enqueue would wake them: a worker waiting on LISTEN claims it without a poll."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(queue="q1"))
    await store.finish(Finish(lease=claimed.lease, status=JobStatus.FAILED, now=at(1)))
    listener, sender = await harness.open_notifier(), await harness.open_notifier()
    await listener.start()
    await sender.start()
    inbox = Inbox()
    listener.subscribe(inbox)

    await store.retry_job(claimed.id, now=at(2))

    await sender.publish("sentinel")  # wake-ups from one publisher arrive in order
    await inbox.wait_for("sentinel")
    woken = [q for q in inbox.received if q != "sentinel"]
    assert woken in (["q1"], [""])


async def test_retry_of_a_job_cancelled_before_it_ran(harness: Harness) -> None:
    """A job cancelled while waiting (never run) retried runs as its first attempt."""
    store = harness.store
    job_id = await enqueue(store)
    await store.request_cancel(job_id, now=at(1))
    retried = await store.retry_job(job_id, now=at(2))
    assert (retried.status, retried.attempt, retried.cancel_phase) == (
        JobStatus.PENDING,
        0,
        CancelPhase.NONE,
    )
    assert (await claim_one(store, now=at(3))).attempt == 1


async def test_retry_refuses_every_other_status_and_changes_nothing(harness: Harness) -> None:
    """Retrying a pending, scheduled, running or succeeded job raises JobNotRetryable with
    the domain's reason for that status, and leaves the job exactly as it was."""
    store = harness.store
    pending = await enqueue(store, new_job("a"))
    scheduled = await enqueue(store, new_job("b", scheduled_at=at(60)))
    running = await enqueue_and_claim(store, new_job("c"))
    done = await enqueue_and_claim(store, new_job("d"))
    await store.finish(Finish(lease=done.lease, status=JobStatus.SUCCEEDED, now=at(1)))
    cases = {
        pending: JobStatus.PENDING,
        scheduled: JobStatus.SCHEDULED,
        running.id: JobStatus.RUNNING,
        done.id: JobStatus.SUCCEEDED,
    }
    for job_id, status in cases.items():
        before = await get(store, job_id)
        with pytest.raises(JobNotRetryable) as refused:
            await store.retry_job(job_id, now=at(2))
        assert refused.value.job_id == job_id
        assert refused.value.reason == retry_refusal(status)
        assert await get(store, job_id) == before


async def test_retry_of_an_unknown_job_raises_job_not_found(harness: Harness) -> None:
    """retry_job of an id no job has raises JobNotFound (ids past bigint too)."""
    with pytest.raises(JobNotFound):
        await harness.store.retry_job(424242)
    with pytest.raises(JobNotFound):
        await harness.store.retry_job(2**63)


async def test_concurrent_retries_of_one_job_make_one_fresh_attempt(harness: Harness) -> None:
    """Of many concurrent retries of one failed job on several stores exactly one succeeds;
    the others are refused finding it pending, and the job is claimed once, attempt 2."""
    stores = [harness.store, *[await harness.open_store() for _ in range(3)]]
    claimed = await enqueue_and_claim(harness.store)
    await harness.store.finish(Finish(lease=claimed.lease, status=JobStatus.FAILED, now=at(1)))

    results = await asyncio.gather(
        *(stores[i % len(stores)].retry_job(claimed.id, now=at(2)) for i in range(12)),
        return_exceptions=True,
    )

    won = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, JobNotRetryable)]
    assert (len(won), len(refused)) == (1, 11), results
    assert {r.reason for r in refused} == {retry_refusal(JobStatus.PENDING)}
    again = await claim_one(harness.store, now=at(3))
    assert (again.id, again.attempt) == (claimed.id, 2)
    assert await harness.store.count_active() == 1


async def test_retry_refuses_while_another_active_job_holds_its_identity_key(
    harness: Harness,
) -> None:
    """A finished job whose identity key another active job of its actor now holds is not
    retried (two active jobs would share the key) until that job ends."""
    store = harness.store
    first = await enqueue_and_claim(store, new_job(identity_key="k"))
    await store.finish(Finish(lease=first.lease, status=JobStatus.FAILED, now=at(1)))
    holder = await enqueue(store, new_job(identity_key="k"), now=at(2))

    with pytest.raises(JobNotRetryable, match=f"job {holder}"):
        await store.retry_job(first.id, now=at(3))
    assert (await get(store, first.id)).status is JobStatus.FAILED

    await store.request_cancel(holder, now=at(4))
    assert (await store.retry_job(first.id, now=at(5))).status is JobStatus.PENDING
    again = await store.enqueue(new_job(identity_key="k"), now=at(6))
    assert (again.job_id, again.was_existing) == (first.id, True)


async def test_worker_status_names_the_leader_and_counts_held_jobs(harness: Harness) -> None:
    """worker_status lists every worker with its workgroup instance, whether the leader
    record names it, and how many running jobs it holds."""
    store = harness.store
    await store.register_worker(
        WorkerInfo(
            worker_id="w1",
            hostname="h1",
            pid=1,
            queues=("default",),
            workgroup_instance="wg-1",
        ),
        now=at(0),
    )
    await register(store, "w2", now=at(1), label="api")
    await enqueue_and_claim(store, new_job("a"), worker="w2")
    await enqueue_and_claim(store, new_job("b"), worker="w2")
    await store.heartbeat(Heartbeat(worker_id="w1", lease=LEASE, is_leader=True, now=at(2)))

    status = {s.worker.worker_id: s for s in await store.worker_status()}
    assert [s.worker.worker_id for s in await store.worker_status()] == ["w1", "w2"]
    assert status["w1"].worker.workgroup_instance == "wg-1"
    assert status["w1"].worker.last_seen_at == at(2)
    assert (status["w1"].is_leader, status["w1"].jobs_held) == (True, 0)
    assert (status["w2"].is_leader, status["w2"].jobs_held) == (False, 2)
    assert status["w2"].worker.worker_label == "api"
    assert [w.workgroup_instance for w in await store.list_workers()] == ["wg-1", None]

    await store.heartbeat(Heartbeat(worker_id="w2", lease=LEASE, is_leader=True, now=at(3)))
    assert [s.is_leader for s in await store.worker_status()] == [False, True]
