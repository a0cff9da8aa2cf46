"""Per-actor max_concurrent: stored, counted across all workers, re-read by every claim."""

from __future__ import annotations

from taskq.domain.actor_config import ActorConfig
from taskq.ports.store_params import CapacityUpdate
from taskq.testing.harness import Harness

from .helpers import ACTORS, at, by_id, claim, enqueue, expected_claim, new_job, succeed


async def _capped(harness: Harness, max_concurrent: int | None) -> None:
    await harness.store.sync_actor_configs(
        [ActorConfig(actor="a", queue="default", max_concurrent=max_concurrent)]
    )


async def test_max_concurrent_caps_a_claim_without_blocking_others(harness: Harness) -> None:
    """A claim takes at most max_concurrent jobs of a capped actor and fills up with others."""
    store = harness.store
    await _capped(harness, 2)
    a_ids = [await enqueue(store, new_job("a", priority=9)) for _ in range(4)]
    b_ids = [await enqueue(store, new_job("b")) for _ in range(3)]
    expected = await expected_claim(
        store, a_ids + b_ids, queues=["default"], actors=ACTORS, limit=4, now=at(1)
    )
    assert expected == [a_ids[0], a_ids[1], b_ids[0], b_ids[1]]
    assert by_id(await claim(store, limit=4, now=at(1))) == expected


async def test_running_jobs_of_every_worker_count(harness: Harness) -> None:
    """Running jobs claimed by other workers, through other stores, use up the actor's capacity."""
    store = harness.store
    other = await harness.open_store()
    await _capped(harness, 3)
    a_ids = [await enqueue(store, new_job("a")) for _ in range(6)]
    assert by_id(await claim(store, worker="w1", limit=2, now=at(1))) == a_ids[:2]
    assert by_id(await claim(other, worker="w2", limit=5, now=at(1))) == [a_ids[2]]
    assert await claim(store, worker="w3", limit=5, now=at(1)) == []


async def test_max_concurrent_is_reread_on_every_claim(harness: Harness) -> None:
    """Raising, lowering and clearing the stored max_concurrent changes the very next claim."""
    store = harness.store
    await _capped(harness, 2)
    ids = [await enqueue(store, new_job("a")) for _ in range(8)]
    assert by_id(await claim(store, now=at(1))) == ids[:2]
    assert await claim(store, now=at(1)) == []

    await store.set_actor_capacity(CapacityUpdate(actor="a", max_concurrent=3))
    assert by_id(await claim(store, now=at(2))) == ids[2:3]

    await store.set_actor_capacity(CapacityUpdate(actor="a", max_concurrent=1))
    assert await claim(store, now=at(3)) == []

    await store.set_actor_capacity(CapacityUpdate(actor="a", clear=frozenset({"max_concurrent"})))
    assert by_id(await claim(store, now=at(4))) == ids[3:]


async def test_finishing_a_job_frees_capacity(harness: Harness) -> None:
    """When a capped actor's running job finishes, the next claim takes one more."""
    store = harness.store
    await _capped(harness, 1)
    ids = [await enqueue(store, new_job("a")) for _ in range(3)]
    first = await claim(store, now=at(1))
    assert by_id(first) == ids[:1]
    assert await claim(store, now=at(1)) == []
    await succeed(store, first[0].lease, now=at(2))
    assert by_id(await claim(store, now=at(3))) == ids[1:2]


async def test_zero_max_concurrent_pauses_the_actor(harness: Harness) -> None:
    """max_concurrent 0 claims none of the actor's jobs while other actors still run."""
    store = harness.store
    await _capped(harness, 0)
    await enqueue(store, new_job("a"))
    jb = await enqueue(store, new_job("b"))
    assert by_id(await claim(store, now=at(1))) == [jb]


async def test_actor_without_config_row_is_unlimited(harness: Harness) -> None:
    """An actor with no actor_config row (or a NULL max_concurrent) has no concurrency cap."""
    store = harness.store
    await _capped(harness, None)
    a_ids = [await enqueue(store, new_job("a")) for _ in range(5)]
    b_ids = [await enqueue(store, new_job("b")) for _ in range(5)]
    assert by_id(await claim(store, now=at(1))) == a_ids + b_ids


async def test_capacity_counts_across_queues(harness: Harness) -> None:
    """An actor's running jobs on any queue count against its max_concurrent."""
    store = harness.store
    await _capped(harness, 2)
    on_q1 = await enqueue(store, new_job("a", queue="q1"))
    on_q2 = [await enqueue(store, new_job("a", queue="q2")) for _ in range(3)]
    assert by_id(await claim(store, queues=["q1"], now=at(1))) == [on_q1]
    assert by_id(await claim(store, queues=["q2"], now=at(1))) == on_q2[:1]
