"""enqueue_many of a UniformJobs batch (one set of options, many payloads): exactly the
jobs its iteration yields, whichever way a store reads it."""

from __future__ import annotations

import pytest

from taskq.domain.actor_config import ActorConfig
from taskq.domain.errors import MaxPendingExceeded
from taskq.domain.job import UniformJobs
from taskq.domain.status import JobStatus
from taskq.testing.harness import Harness

from .helpers import at, get, new_job

#: Over every store's threshold for its bulk path (Postgres: COPY from 200 jobs).
BIG = 450


async def test_a_uniform_batch_stores_each_payload_with_the_shared_options(
    harness: Harness,
) -> None:
    """Every job gets its own payload and the template's options; ids follow input order."""
    template = new_job(
        "a",
        queue="q1",
        priority=4,
        max_attempts=7,
        fairness_key="tenant\t1",
        metadata={"source": "import"},
        tags=("x", "y"),
        trace_id="t1",
    )
    payloads = [{"i": i, "text": "line\nbreak" if i % 7 == 0 else "plain"} for i in range(BIG)]
    results = await harness.store.enqueue_many(UniformJobs(template, payloads), now=at(3))
    ids = [r.job_id for r in results]
    assert ids == sorted(ids)
    assert len(set(ids)) == BIG
    for index in (0, 1, 7, BIG - 1):
        job = await get(harness.store, ids[index])
        assert dict(job.payload) == payloads[index]
        assert (job.queue, job.actor, job.priority, job.max_attempts) == ("q1", "a", 4, 7)
        assert (job.fairness_key, dict(job.metadata), job.tags) == (
            "tenant\t1",
            {"source": "import"},
            ("x", "y"),
        )
        assert (job.trace_id, job.status, job.created_at, job.scheduled_at) == (
            "t1",
            JobStatus.PENDING,
            at(3),
            at(3),
        )


async def test_a_uniform_batch_on_the_database_clock_is_enqueued_now(harness: Harness) -> None:
    """No ``now``: each job is created and due at the store's clock, the same for all."""
    results = await harness.store.enqueue_many(
        UniformJobs(new_job("a"), [{"i": i} for i in range(BIG)])
    )
    first = await get(harness.store, results[0].job_id)
    last = await get(harness.store, results[-1].job_id)
    assert first.created_at == first.scheduled_at == last.created_at
    assert (first.status, last.status) == (JobStatus.PENDING, JobStatus.PENDING)


async def test_a_uniform_batch_scheduled_ahead_is_scheduled(harness: Harness) -> None:
    """A template due later makes every job scheduled at that time."""
    results = await harness.store.enqueue_many(
        UniformJobs(new_job("a", scheduled_at=at(600)), [{"i": i} for i in range(BIG)]),
        now=at(1),
    )
    job = await get(harness.store, results[-1].job_id)
    assert (job.status, job.scheduled_at, job.created_at) == (JobStatus.SCHEDULED, at(600), at(1))


async def test_a_uniform_batch_over_a_stored_max_pending_stores_nothing(
    harness: Harness,
) -> None:
    """The bulk path still honours a stored max_pending, all or nothing."""
    store = harness.store
    await store.sync_actor_configs([ActorConfig(actor="a", queue="default", max_pending=10)])
    with pytest.raises(MaxPendingExceeded):
        await store.enqueue_many(UniformJobs(new_job("a"), [{"i": i} for i in range(BIG)]))
    assert await store.count_active() == 0
