"""max_pending back-pressure: the stored override or the job's literal, never overshot."""

from __future__ import annotations

import asyncio

import pytest

from taskq.domain.actor_config import ActorConfig
from taskq.domain.errors import EnqueueRefused, MaxPendingExceeded
from taskq.domain.job import EnqueueResult
from taskq.ports.store_params import CapacityUpdate
from taskq.testing.harness import EPOCH, Harness

from .helpers import at, claim_one, enqueue, new_job


async def test_literal_max_pending_refuses_when_full(harness: Harness) -> None:
    """At the literal max_pending, enqueue raises MaxPendingExceeded and writes nothing."""
    store = harness.store
    await enqueue(store, new_job(max_pending=2))
    await enqueue(store, new_job(max_pending=2))
    with pytest.raises(MaxPendingExceeded) as refused:
        await store.enqueue(new_job(max_pending=2), now=EPOCH)
    assert (refused.value.actor, refused.value.max_pending) == ("a", 2)
    assert await store.count_active() == 2


async def test_max_pending_is_per_actor(harness: Harness) -> None:
    """One actor at its max_pending does not block another actor."""
    store = harness.store
    await enqueue(store, new_job("a", max_pending=1))
    await enqueue(store, new_job("b", max_pending=1))
    with pytest.raises(MaxPendingExceeded):
        await store.enqueue(new_job("a", max_pending=1), now=EPOCH)
    assert await store.count_active() == 2


async def test_max_pending_counts_scheduled_but_not_running_jobs(harness: Harness) -> None:
    """Scheduled jobs count toward max_pending; running jobs do not."""
    store = harness.store
    await enqueue(store, new_job(max_pending=2, scheduled_at=at(60)), now=at(0))
    await enqueue(store, new_job(max_pending=2), now=at(0))
    with pytest.raises(MaxPendingExceeded):
        await store.enqueue(new_job(max_pending=2), now=at(0))
    await claim_one(store, now=at(1))
    await enqueue(store, new_job(max_pending=2), now=at(2))
    with pytest.raises(MaxPendingExceeded):
        await store.enqueue(new_job(max_pending=2), now=at(3))
    assert await store.count_active() == 3


async def test_stored_max_pending_overrides_a_larger_literal(harness: Harness) -> None:
    """A stored actor_config.max_pending lower than the literal is what is enforced."""
    store = harness.store
    await store.sync_actor_configs([ActorConfig(actor="a", queue="default", max_pending=1)])
    await enqueue(store, new_job(max_pending=5))
    with pytest.raises(MaxPendingExceeded) as refused:
        await store.enqueue(new_job(max_pending=5), now=EPOCH)
    assert refused.value.max_pending == 1


async def test_stored_max_pending_overrides_a_smaller_literal(harness: Harness) -> None:
    """A stored actor_config.max_pending higher than the literal admits up to the stored value."""
    store = harness.store
    await store.sync_actor_configs([ActorConfig(actor="a", queue="default", max_pending=3)])
    for _ in range(3):
        await enqueue(store, new_job(max_pending=1))
    with pytest.raises(MaxPendingExceeded) as refused:
        await store.enqueue(new_job(max_pending=1), now=EPOCH)
    assert refused.value.max_pending == 3


async def test_stored_max_pending_applies_without_a_literal(harness: Harness) -> None:
    """A stored max_pending is enforced even for jobs that carry no literal."""
    store = harness.store
    await store.sync_actor_configs([ActorConfig(actor="a", queue="default", max_pending=1)])
    await enqueue(store, new_job())
    with pytest.raises(MaxPendingExceeded):
        await store.enqueue(new_job(), now=EPOCH)


async def test_cleared_stored_max_pending_reverts_to_the_literal(harness: Harness) -> None:
    """Clearing the stored max_pending makes the job's literal apply again."""
    store = harness.store
    await store.sync_actor_configs([ActorConfig(actor="a", queue="default", max_pending=1)])
    await store.set_actor_capacity(CapacityUpdate(actor="a", clear=frozenset({"max_pending"})))
    await enqueue(store, new_job(max_pending=2))
    await enqueue(store, new_job(max_pending=2))
    with pytest.raises(MaxPendingExceeded) as refused:
        await store.enqueue(new_job(max_pending=2), now=EPOCH)
    assert refused.value.max_pending == 2


async def test_operator_raised_max_pending_takes_effect(harness: Harness) -> None:
    """Raising the stored max_pending with set_actor_capacity admits more jobs at once."""
    store = harness.store
    await store.sync_actor_configs([ActorConfig(actor="a", queue="default", max_pending=1)])
    await enqueue(store, new_job())
    with pytest.raises(MaxPendingExceeded):
        await store.enqueue(new_job(), now=EPOCH)
    await store.set_actor_capacity(CapacityUpdate(actor="a", max_pending=2))
    await enqueue(store, new_job())
    assert await store.count_active() == 2


async def test_key_hit_at_max_pending_returns_the_existing_job(harness: Harness) -> None:
    """A key hit returns the existing job even when the actor is at max_pending."""
    store = harness.store
    first = await enqueue(store, new_job(max_pending=1, identity_key="k", idempotency_key="i"))
    by_identity = await store.enqueue(new_job(max_pending=1, identity_key="k"), now=EPOCH)
    by_idempotency = await store.enqueue(new_job(max_pending=1, idempotency_key="i"), now=EPOCH)
    assert by_identity == EnqueueResult(first, was_existing=True)
    assert by_idempotency == EnqueueResult(first, was_existing=True)


async def test_concurrent_enqueuers_never_overshoot_max_pending(harness: Harness) -> None:
    """Many concurrent enqueuers on several stores never store more than max_pending jobs."""
    stores = [harness.store, *[await harness.open_store() for _ in range(4)]]
    results = await asyncio.gather(
        *(stores[i % len(stores)].enqueue(new_job(max_pending=10), now=EPOCH) for i in range(60)),
        return_exceptions=True,
    )
    stored = [r for r in results if isinstance(r, EnqueueResult)]
    refused = [r for r in results if not isinstance(r, EnqueueResult)]
    assert all(isinstance(r, EnqueueRefused) for r in refused), refused
    assert len(stored) <= 10
    assert len({r.job_id for r in stored}) == len(stored)
    assert await harness.store.count_active() == len(stored)
    # A lock timeout may refuse some racers early; topping up must stop at exactly 10.
    for _ in range(10 - len(stored)):
        await enqueue(harness.store, new_job(max_pending=10))
    with pytest.raises(MaxPendingExceeded):
        await harness.store.enqueue(new_job(max_pending=10), now=EPOCH)
    assert await harness.store.count_active() == 10
