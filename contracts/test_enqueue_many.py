"""JobEnqueuer.enqueue_many: per-job rules, input order, all-or-nothing, one wake-up."""

from __future__ import annotations

import pytest

from taskq.domain.errors import MaxPendingExceeded
from taskq.domain.job import EnqueueResult
from taskq.domain.status import JobStatus
from taskq.ports.store_params import CAP_LISTEN_NOTIFY
from taskq.testing.harness import EPOCH, Harness

from .helpers import Inbox, at, claim, enqueue, get, new_job


async def test_results_follow_input_order(harness: Harness) -> None:
    """enqueue_many returns one result per job, in input order, with increasing ids."""
    jobs = [
        new_job("a", payload={"i": 0}),
        new_job("b", payload={"i": 1}, scheduled_at=at(60)),
        new_job("c", payload={"i": 2}, queue="q2", priority=3),
    ]
    results = await harness.store.enqueue_many(jobs, now=at(1))
    assert len(results) == 3
    assert all(isinstance(r, EnqueueResult) and not r.was_existing for r in results)
    ids = [r.job_id for r in results]
    assert ids == sorted(ids)
    assert len(set(ids)) == 3
    stored = [await get(harness.store, i) for i in ids]
    assert [dict(j.payload) for j in stored] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert [j.status for j in stored] == [
        JobStatus.PENDING,
        JobStatus.SCHEDULED,
        JobStatus.PENDING,
    ]
    assert [j.scheduled_at for j in stored] == [at(1), at(60), at(1)]
    assert (stored[2].queue, stored[2].priority) == ("q2", 3)


async def test_a_big_batch_stores_every_field_of_every_job(harness: Harness) -> None:
    """A batch of hundreds keeps each job's own fields exactly, text quoting included.

    Big batches may take another write path than small ones (Postgres copies
    them); what is stored must not depend on it.
    """
    odd = 'tab\there, newline\nhere, back\\slash, "quote", \\N, é, \u2603'
    jobs = [
        new_job(
            "a" if i % 3 else "b",
            queue="q" if i % 2 else odd,
            payload={"i": i, "text": odd, "nested": [1.5, None, True, {"k": odd}]},
            priority=i % 5 - 2,
            scheduled_at=at(60) if i % 4 == 0 else (at(-5) if i % 4 == 1 else None),
            schedule_to_close=at(3600) if i % 5 == 0 else None,
            max_attempts=None if i % 6 == 0 else 1 + i % 4,
            fairness_key=odd if i % 7 == 0 else None,
            metadata={"m": odd, "i": i} if i % 2 else {},
            tags=(odd, "x,y", "{}") if i % 3 == 0 else (),
            trace_id=f"t{i}" if i % 2 else None,
            span_id=odd if i % 8 == 0 else None,
        )
        for i in range(450)
    ]
    results = await harness.store.enqueue_many(jobs, now=at(1))
    ids = [r.job_id for r in results]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(jobs)
    for job, job_id in zip(jobs, ids, strict=True):
        stored = await get(harness.store, job_id)
        scheduled = job.scheduled_at is not None and job.scheduled_at > at(1)
        assert stored.status == (JobStatus.SCHEDULED if scheduled else JobStatus.PENDING)
        assert stored.scheduled_at == (job.scheduled_at if scheduled else at(1))
        assert stored.created_at == at(1)
        assert (stored.actor, stored.queue, stored.priority) == (job.actor, job.queue, job.priority)
        assert dict(stored.payload) == job.payload
        assert dict(stored.metadata) == job.metadata
        assert tuple(stored.tags) == tuple(job.tags)
        assert stored.max_attempts == job.max_attempts
        assert stored.schedule_to_close == job.schedule_to_close
        assert (stored.fairness_key, stored.trace_id, stored.span_id) == (
            job.fairness_key,
            job.trace_id,
            job.span_id,
        )
        assert stored.attempt == 0


async def test_a_big_batch_with_a_value_json_cannot_hold_writes_nothing(
    harness: Harness,
) -> None:
    """One payload JSON cannot hold (NaN) refuses a big batch before anything is stored."""
    jobs = [new_job(payload={"i": i}) for i in range(300)]
    jobs[299] = new_job(payload={"i": float("nan")})
    with pytest.raises(ValueError, match=r"(?i)nan|json|float"):
        await harness.store.enqueue_many(jobs, now=at(1))
    assert await harness.store.count_active() == 0


async def test_empty_batch_returns_nothing(harness: Harness) -> None:
    """enqueue_many of no jobs returns an empty list and stores nothing."""
    assert await harness.store.enqueue_many([], now=EPOCH) == []
    assert await harness.store.count_active() == 0


async def test_batch_dedups_against_stored_jobs(harness: Harness) -> None:
    """A job in a batch whose identity key is held returns the stored job; the rest are new."""
    store = harness.store
    held = await enqueue(store, new_job(identity_key="k"))
    results = await store.enqueue_many(
        [new_job(payload={"i": 0}), new_job(identity_key="k"), new_job(payload={"i": 2})],
        now=EPOCH,
    )
    assert results[1] == EnqueueResult(held, was_existing=True)
    assert not results[0].was_existing
    assert not results[2].was_existing
    assert await store.count_active() == 3


async def test_batch_dedups_within_itself(harness: Harness) -> None:
    """Two jobs in one batch with the same identity key store one job; the second returns it."""
    results = await harness.store.enqueue_many(
        [new_job(identity_key="k", payload={"i": 0}), new_job(identity_key="k")], now=EPOCH
    )
    assert results[0].was_existing is False
    assert results[1] == EnqueueResult(results[0].job_id, was_existing=True)
    assert dict((await get(harness.store, results[0].job_id)).payload) == {"i": 0}
    assert await harness.store.count_active() == 1


async def test_batch_is_all_or_nothing_on_max_pending(harness: Harness) -> None:
    """A batch with one job over max_pending raises and stores none of its jobs."""
    store = harness.store
    await enqueue(store, new_job("c", max_pending=1))
    with pytest.raises(MaxPendingExceeded):
        await store.enqueue_many(
            [new_job("a"), new_job("c", max_pending=1), new_job("b")], now=EPOCH
        )
    assert await store.count_active() == 1
    # The same batch without the refused job goes through.
    results = await store.enqueue_many([new_job("a"), new_job("b")], now=EPOCH)
    assert len(results) == 2
    assert await store.count_active() == 3


async def test_a_refused_batch_leaves_nothing_to_claim(harness: Harness) -> None:
    """Jobs of a refused batch are never claimed, even those before the refused one;
    a claim finds exactly the jobs enqueued around it, in order."""
    store = harness.store
    first = await enqueue(store, new_job("c", max_pending=1))
    with pytest.raises(MaxPendingExceeded):
        await store.enqueue_many(
            [new_job("a", priority=5), new_job("c", max_pending=1), new_job("b", priority=5)],
            now=EPOCH,
        )
    last = await enqueue(store, new_job("b"))
    assert [job.id for job in await claim(store)] == [first, last]
    assert await claim(store) == []


async def test_max_pending_counts_jobs_earlier_in_the_batch(harness: Harness) -> None:
    """Earlier jobs of a batch count toward max_pending; the batch is refused as a whole."""
    store = harness.store
    with pytest.raises(MaxPendingExceeded):
        await store.enqueue_many([new_job(max_pending=2) for _ in range(3)], now=EPOCH)
    assert await store.count_active() == 0
    assert len(await store.enqueue_many([new_job(max_pending=2)] * 2, now=EPOCH)) == 2


@pytest.mark.taskq_ports("queue_store", "notifier")
@pytest.mark.taskq_requires(CAP_LISTEN_NOTIFY)
async def test_batch_wakes_listeners_once(harness: Harness) -> None:
    """One enqueue_many sends one wake-up, not one per job."""
    listener = await harness.open_notifier()
    sender = await harness.open_notifier()
    await listener.start()
    await sender.start()
    inbox = Inbox()
    listener.subscribe(inbox)
    await harness.store.enqueue_many([new_job(queue="q1") for _ in range(5)], now=EPOCH)
    # Wake-ups arrive in commit order: once the sentinel is in, the batch's are too.
    await sender.publish("sentinel")
    await inbox.wait_for("sentinel")
    woken = [q for q in inbox.received if q != "sentinel"]
    assert len(woken) == 1, woken
    assert woken[0] in ("q1", "")


@pytest.mark.taskq_ports("queue_store", "notifier")
@pytest.mark.taskq_requires(CAP_LISTEN_NOTIFY)
async def test_single_enqueue_wakes_listeners(harness: Harness) -> None:
    """A single due enqueue wakes listeners for its queue (or for any queue)."""
    listener = await harness.open_notifier()
    sender = await harness.open_notifier()
    await listener.start()
    await sender.start()
    inbox = Inbox()
    listener.subscribe(inbox)
    await enqueue(harness.store, new_job(queue="q1"))
    await sender.publish("sentinel")
    await inbox.wait_for("sentinel")
    woken = [q for q in inbox.received if q != "sentinel"]
    assert len(woken) == 1, woken
    assert woken[0] in ("q1", "")
