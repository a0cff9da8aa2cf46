"""JobEnqueuer.enqueue: what is stored, and de-duplication by identity and idempotency keys."""

from __future__ import annotations

import asyncio

import pytest

from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import EnqueueRefused
from taskq.domain.job import EnqueueResult, Job, NewJob
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish
from taskq.testing.harness import EPOCH, Harness

from .helpers import (
    at,
    by_id,
    claim,
    enqueue,
    enqueue_and_claim,
    get,
    new_job,
    succeed,
)


async def test_enqueued_job_reads_back_every_field(harness: Harness) -> None:
    """A job due now is stored pending with every given field read back unchanged."""
    job = NewJob(
        actor="a",
        queue="q1",
        payload={"n": 1, "items": [1, "two", None], "nested": {"k": 1.5, "b": True}},
        priority=5,
        schedule_to_close=at(3600),
        max_attempts=7,
        identity_key="ik",
        fairness_key="tenant-1",
        idempotency_key="idem",
        metadata={"origin": "contract", "n": 2},
        tags=("t1", "t2"),
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
    )
    result = await harness.store.enqueue(job, now=at(10))
    assert isinstance(result, EnqueueResult)
    assert result.was_existing is False

    got = await get(harness.store, result.job_id)
    assert isinstance(got, Job)
    assert got.id == result.job_id
    assert got.status is JobStatus.PENDING
    assert (got.queue, got.actor, got.priority) == ("q1", "a", 5)
    assert dict(got.payload) == {"n": 1, "items": [1, "two", None], "nested": {"k": 1.5, "b": True}}
    assert got.schedule_to_close == at(3600)
    assert got.max_attempts == 7
    assert (got.identity_key, got.fairness_key, got.idempotency_key) == ("ik", "tenant-1", "idem")
    assert dict(got.metadata) == {"origin": "contract", "n": 2}
    assert got.tags == ("t1", "t2")
    assert (got.trace_id, got.span_id) == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    assert got.created_at == at(10)
    assert got.scheduled_at == at(10)
    assert got.attempt == 0
    assert got.cancel_phase is CancelPhase.NONE
    assert got.cancel_requested_at is None
    assert (got.started_at, got.finished_at) == (None, None)
    assert (got.locked_by, got.lock_expires_at) == (None, None)
    assert (got.result, got.result_expires_at, got.last_error) == (None, None, None)
    assert got.snooze_count == 0
    assert await harness.store.attempts(result.job_id) == []


async def test_new_job_defaults_are_stored(harness: Harness) -> None:
    """A job enqueued with only an actor gets the NewJob defaults (default queue, 3 attempts)."""
    got = await get(harness.store, await enqueue(harness.store, NewJob(actor="a")))
    assert (got.queue, got.priority, got.max_attempts) == ("default", 0, 3)
    assert (dict(got.payload), dict(got.metadata), got.tags) == ({}, {}, ())
    assert (got.identity_key, got.fairness_key, got.idempotency_key) == (None, None, None)
    assert (got.schedule_to_close, got.trace_id, got.span_id) == (None, None, None)


async def test_unbounded_max_attempts_is_stored(harness: Harness) -> None:
    """max_attempts=None (unbounded) reads back as None."""
    got = await get(harness.store, await enqueue(harness.store, new_job(max_attempts=None)))
    assert got.max_attempts is None


async def test_future_scheduled_at_is_stored_scheduled(harness: Harness) -> None:
    """A job whose scheduled_at is after now is stored scheduled at exactly that time."""
    job_id = await enqueue(harness.store, new_job(scheduled_at=at(60)), now=at(0))
    got = await get(harness.store, job_id)
    assert got.status is JobStatus.SCHEDULED
    assert got.scheduled_at == at(60)
    assert got.created_at == at(0)


async def test_scheduled_at_equal_to_now_is_pending(harness: Harness) -> None:
    """A job whose scheduled_at equals now is pending at once, scheduled_at = now."""
    job_id = await enqueue(harness.store, new_job(scheduled_at=at(5)), now=at(5))
    got = await get(harness.store, job_id)
    assert got.status is JobStatus.PENDING
    assert got.scheduled_at == at(5)


async def test_past_scheduled_at_is_pending_at_now(harness: Harness) -> None:
    """A job whose scheduled_at is already past is pending with scheduled_at = now."""
    job_id = await enqueue(harness.store, new_job(scheduled_at=at(-60)), now=at(5))
    got = await get(harness.store, job_id)
    assert got.status is JobStatus.PENDING
    assert got.scheduled_at == at(5)


async def test_ids_increase_in_enqueue_order(harness: Harness) -> None:
    """Ids increase in enqueue order, whatever the enqueue timestamps are."""
    ids = [await enqueue(harness.store, now=at(100 - i)) for i in range(6)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


async def test_get_unknown_job_returns_none(harness: Harness) -> None:
    """get() of an id that was never enqueued returns None, and attempts() is empty."""
    known = await enqueue(harness.store)
    assert await harness.store.get(known + 1000) is None
    assert await harness.store.attempts(known + 1000) == []


# --- identity_key ------------------------------------------------------------------------


async def test_identity_key_returns_waiting_job(harness: Harness) -> None:
    """A second enqueue with the identity key of a waiting job returns it and writes nothing."""
    store = harness.store
    first = await store.enqueue(
        new_job(identity_key="k", payload={"v": 1}, scheduled_at=at(60)), now=at(0)
    )
    again = await store.enqueue(new_job(identity_key="k", payload={"v": 2}), now=at(1))
    assert again == EnqueueResult(first.job_id, was_existing=True)
    got = await get(store, first.job_id)
    assert got.status is JobStatus.SCHEDULED
    assert dict(got.payload) == {"v": 1}
    assert await store.count_active() == 1


async def test_identity_key_returns_running_job(harness: Harness) -> None:
    """A running job still holds its identity key."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(identity_key="k"))
    again = await store.enqueue(new_job(identity_key="k"), now=at(1))
    assert again == EnqueueResult(claimed.id, was_existing=True)
    assert await store.count_active() == 1


async def test_identity_key_is_scoped_to_the_actor(harness: Harness) -> None:
    """The same identity key on another actor does not de-duplicate."""
    store = harness.store
    first = await store.enqueue(new_job("a", identity_key="k"), now=EPOCH)
    other = await store.enqueue(new_job("b", identity_key="k"), now=EPOCH)
    assert other.was_existing is False
    assert other.job_id != first.job_id


@pytest.mark.parametrize(
    "status",
    [JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED],
    ids=lambda s: str(s),
)
async def test_identity_key_is_freed_when_the_job_finishes(
    harness: Harness, status: JobStatus
) -> None:
    """Once the job with an identity key is terminal, the key admits a new job."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(identity_key="k"))
    await store.finish(Finish(lease=claimed.lease, status=status, now=at(1)))
    again = await store.enqueue(new_job(identity_key="k"), now=at(2))
    assert again.was_existing is False
    assert again.job_id != claimed.id
    assert (await get(store, again.job_id)).status is JobStatus.PENDING


async def test_identity_key_is_freed_when_a_waiting_job_is_cancelled(harness: Harness) -> None:
    """Cancelling a pending job with an identity key frees the key."""
    store = harness.store
    first = await enqueue(store, new_job(identity_key="k"))
    assert await store.request_cancel(first, now=at(1)) is JobStatus.CANCELLED
    again = await store.enqueue(new_job(identity_key="k"), now=at(2))
    assert again.was_existing is False


async def test_concurrent_identity_key_enqueues_store_one_job(harness: Harness) -> None:
    """Concurrent enqueues with one identity key, on several stores, store exactly one job."""
    stores = [harness.store, *[await harness.open_store() for _ in range(3)]]
    results = await asyncio.gather(
        *(
            stores[i % len(stores)].enqueue(new_job(identity_key="k", payload={"i": i}), now=EPOCH)
            for i in range(24)
        ),
        return_exceptions=True,
    )
    ok = [r for r in results if isinstance(r, EnqueueResult)]
    refused = [r for r in results if not isinstance(r, EnqueueResult)]
    assert all(isinstance(r, EnqueueRefused) for r in refused), refused
    assert len({r.job_id for r in ok}) == 1
    assert sum(not r.was_existing for r in ok) == 1
    assert await harness.store.count_active() == 1


# --- idempotency_key ---------------------------------------------------------------------


async def test_idempotency_key_returns_the_job_in_any_status(harness: Harness) -> None:
    """An idempotency key keeps returning its job even after the job succeeded."""
    store = harness.store
    claimed = await enqueue_and_claim(store, new_job(idempotency_key="idem"))
    again_running = await store.enqueue(new_job(idempotency_key="idem"), now=at(1))
    assert again_running == EnqueueResult(claimed.id, was_existing=True)
    await succeed(store, claimed.lease, now=at(2))
    again_done = await store.enqueue(new_job(idempotency_key="idem"), now=at(3))
    assert again_done == EnqueueResult(claimed.id, was_existing=True)
    assert await store.count_active() == 0
    assert (await get(store, claimed.id)).status is JobStatus.SUCCEEDED


async def test_idempotency_key_is_scoped_to_the_actor(harness: Harness) -> None:
    """The same idempotency key on another actor stores a new job."""
    store = harness.store
    first = await store.enqueue(new_job("a", idempotency_key="idem"), now=EPOCH)
    other = await store.enqueue(new_job("b", idempotency_key="idem"), now=EPOCH)
    assert other.was_existing is False
    assert other.job_id != first.job_id


async def test_concurrent_idempotency_key_enqueues_store_one_job(harness: Harness) -> None:
    """Concurrent enqueues with one idempotency key, on several stores, store exactly one job."""
    stores = [harness.store, *[await harness.open_store() for _ in range(3)]]
    results = await asyncio.gather(
        *(
            stores[i % len(stores)].enqueue(new_job(idempotency_key="idem"), now=EPOCH)
            for i in range(24)
        ),
        return_exceptions=True,
    )
    ok = [r for r in results if isinstance(r, EnqueueResult)]
    refused = [r for r in results if not isinstance(r, EnqueueResult)]
    assert all(isinstance(r, EnqueueRefused) for r in refused), refused
    assert len({r.job_id for r in ok}) == 1
    assert sum(not r.was_existing for r in ok) == 1
    assert await harness.store.count_active() == 1


async def test_deduplicated_enqueue_adds_nothing_claimable(harness: Harness) -> None:
    """After an identity-key hit, a claim finds only the original job."""
    store = harness.store
    first = await enqueue(store, new_job(identity_key="k"))
    await store.enqueue(new_job(identity_key="k"), now=EPOCH)
    assert by_id(await claim(store, now=at(1))) == [first]
