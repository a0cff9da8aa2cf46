"""Builders shared by the contract tests.

Every time is derived from :data:`taskq.testing.EPOCH` (``at(seconds)``)
and passed explicitly, so every adapter computes the same timestamps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from taskq.domain.dispatch import (
    DispatchCandidate,
    advance_cursors,
    residual_capacity,
    select_for_dispatch,
)
from taskq.domain.job import DEFAULT_QUEUE, ClaimedJob, Job, Lease, NewJob
from taskq.domain.status import JobStatus
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import ClaimRequest, Finish, WorkerInfo
from taskq.testing.harness import EPOCH

#: The lease every claim in the suite asks for unless a test needs another.
LEASE = timedelta(seconds=60)
#: One microsecond: the smallest step both Python and Postgres timestamps keep.
TICK = timedelta(microseconds=1)
#: Bounded wait for anything asynchronous (notifications); never a timing assertion.
WAIT = 5.0
ACTORS: tuple[str, ...] = ("a", "b", "c")

T = TypeVar("T")


def at(seconds: float) -> datetime:
    """``EPOCH`` plus ``seconds``."""
    return EPOCH + timedelta(seconds=seconds)


def new_job(actor: str = "a", **fields: Any) -> NewJob:
    """A :class:`NewJob` for ``actor`` on the default queue unless ``fields`` say otherwise."""
    return NewJob(actor=actor, **fields)


async def enqueue(store: QueueStore, job: NewJob | None = None, *, now: datetime = EPOCH) -> int:
    """Enqueue one job (a default one for actor ``a``) and return its id."""
    result = await store.enqueue(job or new_job(), now=now)
    assert not result.was_existing
    return result.job_id


async def enqueue_n(
    store: QueueStore, count: int, *, now: datetime = EPOCH, **fields: Any
) -> list[int]:
    """Enqueue ``count`` identical jobs one by one; ids in enqueue order."""
    return [await enqueue(store, new_job(**fields), now=now) for _ in range(count)]


async def claim(
    store: QueueStore,
    *,
    worker: str = "w1",
    queues: Sequence[str] = (DEFAULT_QUEUE,),
    actors: Sequence[str] = ACTORS,
    limit: int = 100,
    lease: timedelta = LEASE,
    now: datetime | None = EPOCH,
    start_now: int = 0,
) -> list[ClaimedJob]:
    """Claim with the suite's defaults (unstarted, as jobs claimed ahead of the consumers);
    ``now`` None claims on the store's own clock."""
    request = ClaimRequest(
        worker_id=worker,
        queues=queues,
        actors=actors,
        limit=limit,
        lease=lease,
        now=now,
        start_now=start_now,
    )
    return await store.claim(request)


async def claim_one(store: QueueStore, **kwargs: Any) -> ClaimedJob:
    """Claim exactly one job (asserting that one was due)."""
    claimed = await claim(store, limit=1, **kwargs)
    assert len(claimed) == 1, claimed
    return claimed[0]


async def enqueue_and_claim(
    store: QueueStore,
    job: NewJob | None = None,
    *,
    worker: str = "w1",
    now: datetime = EPOCH,
    lease: timedelta = LEASE,
    started: bool = True,
) -> ClaimedJob:
    """Enqueue one job and claim it; no other due job of its actor and queue may be waiting.

    ``started`` (the default): claimed for a waiting consumer, so marked started, as a
    job its worker runs; otherwise claimed ahead, never started.
    """
    job = job or new_job()
    job_id = await enqueue(store, job, now=now)
    claimed = await claim_one(
        store,
        worker=worker,
        now=now,
        lease=lease,
        queues=[job.queue],
        actors=[job.actor],
        start_now=1 if started else 0,
    )
    assert claimed.id == job_id
    return claimed


async def get(store: QueueStore, job_id: int) -> Job:
    """Read a job that must exist."""
    job = await store.get(job_id)
    assert job is not None, f"job {job_id} vanished"
    return job


async def get_all(store: QueueStore, job_ids: Iterable[int]) -> list[Job]:
    return [await get(store, i) for i in job_ids]


async def succeed(store: QueueStore, lease: Lease, *, now: datetime = EPOCH) -> None:
    await store.finish(Finish(lease=lease, status=JobStatus.SUCCEEDED, now=now))


async def register(
    store: QueueStore,
    worker: str,
    *,
    queues: Sequence[str] = (DEFAULT_QUEUE,),
    now: datetime = EPOCH,
    label: str | None = None,
) -> WorkerInfo:
    info = WorkerInfo(
        worker_id=worker,
        hostname="contract-host",
        pid=4242,
        queues=queues,
        actors=ACTORS,
        worker_label=label,
    )
    await store.register_worker(info, now=now)
    return info


def candidate(job: Job) -> DispatchCandidate:
    return DispatchCandidate(
        id=job.id,
        queue=job.queue,
        actor=job.actor,
        priority=job.priority,
        scheduled_at=job.scheduled_at,
        fairness_key=job.fairness_key,
    )


async def expected_claim(
    store: QueueStore,
    known_ids: Iterable[int],
    *,
    queues: Sequence[str],
    actors: Sequence[str],
    limit: int,
    now: datetime,
    cursors: Mapping[str, str] | None = None,
) -> list[int]:
    """What the reference model says a claim takes, from the store's own reads.

    Residual capacity counts every running job of the actor (any queue, any
    worker) against its stored ``max_concurrent``. ``cursors``: the round_robin
    queues' rotation cursors, which the caller follows with :func:`rotate`
    (none: no claim has been made on them yet).
    """
    jobs = await get_all(store, known_ids)
    due = [
        candidate(j)
        for j in jobs
        if j.status is JobStatus.PENDING
        and j.scheduled_at <= now
        and j.queue in queues
        and j.actor in actors
    ]
    running: dict[str, int] = {}
    for j in jobs:
        if j.status is JobStatus.RUNNING:
            running[j.actor] = running.get(j.actor, 0) + 1
    stored = {c.actor: c.max_concurrent for c in await store.list_actor_configs()}
    picked = select_for_dispatch(
        due,
        modes=await store.queue_modes(),
        residual=residual_capacity(stored, running),
        limit=limit,
        cursors=cursors,
    )
    return [c.id for c in picked]


async def rotate(
    store: QueueStore, cursors: Mapping[str, str], claimed: Sequence[ClaimedJob]
) -> dict[str, str]:
    """The round_robin cursors after a claim returned ``claimed`` (in dispatch order)."""
    taken = [(job.queue, job.fairness_key) for job in claimed]
    return advance_cursors(cursors, taken, await store.queue_modes())


async def within(awaitable: Awaitable[T], what: str, seconds: float = WAIT) -> T:
    """Await with a bound; fail naming ``what`` when it does not finish in time."""
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except TimeoutError:
        raise AssertionError(f"timed out after {seconds}s waiting for {what}") from None


class Inbox:
    """A wake-up callback that records queue names and signals each arrival."""

    def __init__(self) -> None:
        self.received: list[str] = []
        self._arrived = asyncio.Event()

    def __call__(self, queue: str) -> None:
        self.received.append(queue)
        self._arrived.set()

    async def wait_for(self, queue: str) -> None:
        """Wait (bounded) until a wake-up for ``queue`` has arrived."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT
        while queue not in self.received:
            self._arrived.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"no wake-up for {queue!r}; got {self.received!r}")
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                continue


def by_id(jobs: Iterable[ClaimedJob]) -> list[int]:
    return [j.id for j in jobs]


def ids_of(leases: Iterable[Lease]) -> set[int]:
    return {lease.job_id for lease in leases}
