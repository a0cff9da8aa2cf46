"""stranded_actors: the waiting jobs no live worker can claim, per (actor, queue), and why."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from taskq.domain.actor_config import ActorConfig
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import Heartbeat, StrandedJobs, StrandedReason, WorkerInfo
from taskq.testing.harness import Harness

from .helpers import at, claim_one, enqueue, new_job

LIVE = timedelta(seconds=60)


async def _worker(
    store: QueueStore, worker: str, *, actors: Sequence[str], queues: Sequence[str], seen: float
) -> None:
    info = WorkerInfo(
        worker_id=worker, hostname="contract-host", pid=1, queues=queues, actors=actors
    )
    await store.register_worker(info, now=at(seen))


def _stranded(actor: str, queue: str, waiting: int, reason: StrandedReason) -> StrandedJobs:
    return StrandedJobs(actor=actor, queue=queue, waiting=waiting, reason=reason)


async def test_stranded_actors_name_each_reason(harness: Harness) -> None:
    """Waiting jobs no live worker can claim are reported per (actor, queue), sorted, with the
    reason (never registered, no live worker registers it, its queue not consumed); jobs a
    live worker can claim and running jobs are not."""
    store = harness.store
    await store.sync_actor_configs(
        [ActorConfig(actor="a", queue="default"), ActorConfig(actor="retired", queue="default")]
    )
    await _worker(store, "w1", actors=["a"], queues=["default"], seen=0)
    await enqueue(store, new_job("a"))  # w1 claims these
    for _ in range(2):
        await enqueue(store, new_job("a", queue="other"))  # w1 does not consume "other"
    await enqueue(store, new_job("retired"))
    for _ in range(2):
        await enqueue(store, new_job("ghost"))
    await enqueue(store, new_job("ghost", scheduled_at=at(3600)))
    await enqueue(store, new_job("ghost", queue="other"))
    await claim_one(store, actors=["ghost"], now=at(1))  # running: not waiting
    assert await store.stranded_actors(stale_after=LIVE, now=at(10)) == [
        _stranded("a", "other", 2, StrandedReason.QUEUE_NOT_CONSUMED),
        _stranded("ghost", "default", 2, StrandedReason.UNREGISTERED),
        _stranded("ghost", "other", 1, StrandedReason.UNREGISTERED),
        _stranded("retired", "default", 1, StrandedReason.NO_LIVE_WORKER),
    ]


async def test_stranded_actors_count_only_workers_seen_within_stale_after(
    harness: Harness,
) -> None:
    """A worker not seen for longer than stale_after no longer counts as able to claim; its
    heartbeat makes it count again, and a deregistered worker never does."""
    store = harness.store
    await store.sync_actor_configs([ActorConfig(actor="a", queue="default")])
    await _worker(store, "w1", actors=["a"], queues=["default"], seen=0)
    await enqueue(store, new_job("a"))
    assert await store.stranded_actors(stale_after=LIVE, now=at(30)) == []
    gone = [_stranded("a", "default", 1, StrandedReason.NO_LIVE_WORKER)]
    assert await store.stranded_actors(stale_after=LIVE, now=at(120)) == gone
    await store.heartbeat(Heartbeat(worker_id="w1", lease=LIVE, now=at(100)))
    assert await store.stranded_actors(stale_after=LIVE, now=at(120)) == []
    await store.deregister_worker("w1")
    assert await store.stranded_actors(stale_after=LIVE, now=at(120)) == gone


async def test_stranded_actors_needs_one_worker_with_both_actor_and_queue(
    harness: Harness,
) -> None:
    """One live worker registering the actor and another consuming the queue do not make a job
    claimable: the reason is then that no worker registering it consumes the queue."""
    store = harness.store
    await store.sync_actor_configs([ActorConfig(actor="a", queue="q1")])
    await _worker(store, "w1", actors=["a"], queues=["q2"], seen=0)
    await _worker(store, "w2", actors=["b"], queues=["q1"], seen=0)
    await enqueue(store, new_job("a", queue="q1"))
    assert await store.stranded_actors(stale_after=LIVE, now=at(1)) == [
        _stranded("a", "q1", 1, StrandedReason.QUEUE_NOT_CONSUMED)
    ]


async def test_stranded_actors_on_some_queues_reads_only_those(harness: Harness) -> None:
    """With queues, only waiting jobs on those queues are reported."""
    store = harness.store
    for queue in ("q1", "q2", "q3"):
        await enqueue(store, new_job("ghost", queue=queue))
    assert await store.stranded_actors(["q1", "q3"], stale_after=LIVE, now=at(1)) == [
        _stranded("ghost", "q1", 1, StrandedReason.UNREGISTERED),
        _stranded("ghost", "q3", 1, StrandedReason.UNREGISTERED),
    ]
    assert await store.stranded_actors(["nothing"], stale_after=LIVE, now=at(1)) == []
