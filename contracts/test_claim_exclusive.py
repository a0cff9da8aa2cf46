"""Exclusive claims under real concurrency: no job is ever handed to two claimers."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from taskq.domain.actor_config import QueueMode
from taskq.domain.job import ClaimedJob
from taskq.domain.status import JobStatus
from taskq.ports.queue_store import QueueStore
from taskq.testing.harness import EPOCH, Harness

from .helpers import at, claim, get_all, new_job

JOBS = 500
CLAIMERS = 20
STORES = 4


async def _claim_until_empty(
    store: QueueStore, worker: str, rng: random.Random
) -> list[ClaimedJob]:
    got: list[ClaimedJob] = []
    while True:
        batch = await claim(store, worker=worker, limit=rng.randint(1, 7), now=at(1))
        if not batch:
            return got
        got.extend(batch)
        await asyncio.sleep(0)  # let the other claimers interleave


async def test_concurrent_claimers_get_every_job_exactly_once(harness: Harness) -> None:
    """Twenty concurrent claimers on several stores claim 500 jobs with none claimed twice."""
    stores = [harness.store, *[await harness.open_store() for _ in range(STORES - 1)]]
    ids: list[int] = []
    for start in range(0, JOBS, 100):
        batch = [new_job(payload={"n": n}) for n in range(start, start + 100)]
        ids += [r.job_id for r in await harness.store.enqueue_many(batch, now=EPOCH)]
    rng = random.Random(7)
    per_worker = await asyncio.gather(
        *(
            _claim_until_empty(stores[i % STORES], f"w{i}", random.Random(rng.random()))
            for i in range(CLAIMERS)
        )
    )
    # A claimer may give up while rows are locked by others; a last sweep takes leftovers.
    leftovers = await claim(harness.store, worker="sweeper", limit=JOBS, now=at(1))
    owner: dict[int, str] = {}
    counts: Counter[int] = Counter()
    for i, claimed in enumerate([*per_worker, leftovers]):
        worker = "sweeper" if i == CLAIMERS else f"w{i}"
        for job in claimed:
            counts[job.id] += 1
            owner[job.id] = worker
    assert [job_id for job_id, n in counts.items() if n > 1] == []
    assert sorted(counts) == sorted(ids)
    assert len(set(owner.values())) > 1, "the claimers never overlapped"
    for stored in await get_all(harness.store, ids):
        assert stored.status is JobStatus.RUNNING
        assert stored.locked_by == owner[stored.id]
        assert stored.attempt == 1
    assert await harness.store.count_active() == JOBS


async def test_concurrent_round_robin_claimers_get_every_job_exactly_once(
    harness: Harness,
) -> None:
    """On a round_robin queue, whose claims also move the queue's rotation cursor,
    concurrent claimers on several stores still claim every job exactly once and
    never block one another for good."""
    await harness.store.set_queue_mode("default", QueueMode.ROUND_ROBIN)
    stores = [harness.store, *[await harness.open_store() for _ in range(STORES - 1)]]
    batch = [new_job(payload={"n": n}, fairness_key=f"t{n % 7}") for n in range(200)]
    ids = [r.job_id for r in await harness.store.enqueue_many(batch, now=EPOCH)]
    rng = random.Random(11)
    per_worker = await asyncio.gather(
        *(
            _claim_until_empty(stores[i % STORES], f"w{i}", random.Random(rng.random()))
            for i in range(8)
        )
    )
    leftovers = await claim(harness.store, worker="sweeper", limit=len(ids), now=at(1))
    counts: Counter[int] = Counter(
        job.id for claimed in [*per_worker, leftovers] for job in claimed
    )
    assert [job_id for job_id, n in counts.items() if n > 1] == []
    assert sorted(counts) == sorted(ids)
