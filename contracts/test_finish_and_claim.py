"""finish_and_claim: a worker's finished jobs written, then its next claim, in one call."""

from __future__ import annotations

from datetime import timedelta

import pytest

from taskq.domain.errors import IllegalTransition
from taskq.domain.job import Lease
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, Finish
from taskq.testing.harness import Harness

from .helpers import (
    ACTORS,
    LEASE,
    at,
    claim_one,
    enqueue_n,
    get,
    new_job,
    register,
)

QUEUES = ["default"]


def request(*, limit: int = 10, queues: list[str] = QUEUES, worker: str = "w1") -> ClaimRequest:
    return ClaimRequest(
        worker_id=worker, queues=queues, actors=ACTORS, limit=limit, lease=LEASE, now=at(10)
    )


async def test_finishes_are_written_and_the_next_jobs_claimed(harness: Harness) -> None:
    """One call: the running job ends as asked (attempt recorded, started_at from
    started_ago), and the waiting ones are claimed in FIFO order with fresh tokens."""
    store = harness.store
    first, second, third = await enqueue_n(store, 3)
    running = await claim_one(store)
    assert running.id == first
    lost, claimed = await store.finish_and_claim(
        [
            Finish(
                lease=running.lease,
                status=JobStatus.SUCCEEDED,
                result={"ok": True},
                started_ago=timedelta(seconds=2),
                now=at(9),
            )
        ],
        request(limit=2),
    )
    assert lost == []
    assert [job.id for job in claimed] == [second, third]
    assert all(job.attempt == 1 for job in claimed)
    done = await get(store, first)
    assert (done.status, done.result, done.finished_at) == (
        JobStatus.SUCCEEDED,
        {"ok": True},
        at(9),
    )
    assert done.started_at == at(7)
    assert [a.outcome for a in await store.attempts(first)] == ["succeeded"]
    for job in claimed:
        got = await get(store, job.id)
        assert (got.status, got.locked_by, got.fencing_token) == (
            JobStatus.RUNNING,
            "w1",
            job.fencing_token,
        )


async def test_leases_not_held_are_reported_and_the_claim_still_runs(harness: Harness) -> None:
    """A stale token and a repeated lease come back as lost (nothing written for them);
    the held lease is written once and the claim takes what is due."""
    store = harness.store
    first, second = await enqueue_n(store, 2)
    running = await claim_one(store)
    stale = Lease(running.id, running.fencing_token + 1000)
    finish = Finish(lease=running.lease, status=JobStatus.FAILED, error="boom", now=at(9))
    lost, claimed = await store.finish_and_claim(
        [Finish(lease=stale, status=JobStatus.SUCCEEDED, now=at(9)), finish, finish],
        request(),
    )
    assert lost == [stale, running.lease]
    assert [job.id for job in claimed] == [second]
    assert (await get(store, first)).status is JobStatus.FAILED
    assert len(await store.attempts(first)) == 1


async def test_without_finishes_it_is_a_claim(harness: Harness) -> None:
    """No finishes: exactly claim (in dispatch order, at most limit)."""
    store = harness.store
    ids = await enqueue_n(store, 3)
    lost, claimed = await store.finish_and_claim([], request(limit=2))
    assert (lost, [job.id for job in claimed]) == ([], ids[:2])


async def test_a_claim_of_nothing_only_writes(harness: Harness) -> None:
    """limit 0 (or no queue to claim from): the finishes are written, nothing is claimed."""
    store = harness.store
    first, second, third = await enqueue_n(store, 3)
    one = await claim_one(store)
    two = await claim_one(store)
    lost, claimed = await store.finish_and_claim(
        [Finish(lease=one.lease, status=JobStatus.SUCCEEDED, now=at(9))], request(limit=0)
    )
    assert (lost, claimed) == ([], [])
    lost, claimed = await store.finish_and_claim(
        [Finish(lease=two.lease, status=JobStatus.CANCELLED, now=at(9))], request(queues=[])
    )
    assert (lost, claimed) == ([], [])
    assert [(await get(store, i)).status for i in (first, second, third)] == [
        JobStatus.SUCCEEDED,
        JobStatus.CANCELLED,
        JobStatus.PENDING,
    ]


async def test_a_job_finished_in_the_call_is_not_claimed_again(harness: Harness) -> None:
    """The writes come first: a job retried elsewhere is not handed out by the same call,
    and a job finished here stays finished (claimed from other queues too)."""
    store = harness.store
    await register(store, "w1")
    [only] = await enqueue_n(store, 1, queue="other")
    running = await claim_one(store, queues=["other"])
    assert running.id == only
    lost, claimed = await store.finish_and_claim(
        [Finish(lease=running.lease, status=JobStatus.SUCCEEDED, now=at(9))],
        request(queues=["other", "default"]),
    )
    assert (lost, claimed) == ([], [])
    assert (await get(store, only)).status is JobStatus.SUCCEEDED


async def test_a_bad_finish_writes_nothing_and_claims_nothing(harness: Harness) -> None:
    """A non-terminal status in the batch is refused before anything is written or claimed."""
    store = harness.store
    first, second = await enqueue_n(store, 2)
    running = await claim_one(store)
    with pytest.raises(IllegalTransition):
        await store.finish_and_claim(
            [
                Finish(lease=running.lease, status=JobStatus.SUCCEEDED, now=at(9)),
                Finish(lease=running.lease, status=JobStatus.PENDING, now=at(9)),
            ],
            request(),
        )
    assert (await get(store, first)).status is JobStatus.RUNNING
    assert (await get(store, second)).status is JobStatus.PENDING


async def test_claims_of_several_queues_and_actors_are_served_too(harness: Harness) -> None:
    """Two queues (the store's other claim path): same contract."""
    store = harness.store
    await store.enqueue(new_job(queue="q1"), now=at(0))
    await store.enqueue(new_job(queue="q2"), now=at(1))
    running = await claim_one(store, queues=["q1"])
    lost, claimed = await store.finish_and_claim(
        [Finish(lease=running.lease, status=JobStatus.SUCCEEDED, now=at(9))],
        request(queues=["q1", "q2"]),
    )
    assert lost == []
    assert [job.queue for job in claimed] == ["q2"]
    assert (await get(store, running.id)).status is JobStatus.SUCCEEDED
