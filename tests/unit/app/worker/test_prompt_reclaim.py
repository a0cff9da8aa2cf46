"""A dead worker's job runs again within lock_lease + 1 s of its last heartbeat (fake clock).

The victim is a whole worker that "dies" as ``kill -9`` makes it die: from one
instant on nothing it does reaches the store, and its sessions (the leader lock,
the LISTEN) are gone server-side. Its job's lease then ends at the lock the last
heartbeat wrote; the leader must re-pend the job at once, not at its next
30 s sweep, and another worker runs it.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import (
    StoreProxy,
    WorkerRun,
    claim_one,
    events_named,
    fields,
    job,
    make_settings,
)

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.adapters.memory.leader_lock import MemoryLeaderLock
from taskq.adapters.memory.notifier import MemoryNotifier
from taskq.app.actors import actor
from taskq.app.context import JobContext
from taskq.app.worker import events
from taskq.app.worker.leader import LEASE_CHECK_INTERVAL
from taskq.domain.errors import StoreUnavailable
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, ReclaimReport


class Item(BaseModel):
    n: int


@actor
async def hangs_first(payload: Item, ctx: JobContext[Item]) -> int:
    """Attempt 1 never ends on its own (its worker dies under it); later attempts return."""
    if ctx.attempt == 1:
        await asyncio.Event().wait()
    return ctx.attempt


@actor
async def other(payload: Item) -> None:
    """An actor only the bystander leader registers, so it never claims ``hangs_first``."""


#: (lock_lease, heartbeat_interval): the short lease of the issue and the defaults.
TIMINGS = [pytest.param(5.0, 1.0, id="lease-5s"), pytest.param(60.0, 10.0, id="lease-60s")]


def _settings(lease: float, heartbeat: float) -> Any:
    return make_settings(
        lock_lease=lease,
        heartbeat_interval=heartbeat,
        cancellation_grace_period=min(30.0, lease / 4),
        cleanup_grace_period=min(10.0, lease / 4),
        termination_grace_period=max(10.0, lease),
        heartbeat_command_timeout=min(5.0, lease / 2),
    )


async def _kill(run: WorkerRun) -> None:
    """What ``kill -9`` does to a worker: its writes stop landing and its sessions end."""
    run.store.set_reachable(False)
    lock, notifier = run.ports.leader_lock, run.ports.notifier
    assert isinstance(lock, MemoryLeaderLock)
    assert isinstance(notifier, MemoryNotifier)
    lock.sever()
    notifier.sever()
    assert run.task is not None
    run.task.cancel()
    await asyncio.gather(run.task, return_exceptions=True)


async def _running_here(client: MemoryQueueStore, run: WorkerRun, job_id: int) -> bool:
    got = await job(client, job_id)
    return got.status is JobStatus.RUNNING and got.locked_by == run.worker.worker_id


async def _lease_end_at_death(
    client: MemoryQueueStore, victim: WorkerRun, job_id: int, lease: float
) -> datetime:
    """The job's lock when the victim dies: its last heartbeat plus the lease."""
    lock_expires_at = (await job(client, job_id)).lock_expires_at
    assert lock_expires_at is not None
    [row] = [w for w in await client.list_workers() if w.worker_id == victim.worker.worker_id]
    assert lock_expires_at == row.last_seen_at + timedelta(seconds=lease)
    return lock_expires_at


async def _rerun_start(client: MemoryQueueStore, job_id: int) -> tuple[datetime, datetime]:
    """When attempt 1 was reclaimed and when attempt 2 started."""
    done = await job(client, job_id)
    assert done.status is JobStatus.SUCCEEDED
    assert done.attempt == 2
    first = (await client.attempts(job_id))[0]
    assert first.outcome == "lease_expired"
    assert first.finished_at is not None
    assert done.started_at is not None
    return first.finished_at, done.started_at


@pytest.mark.parametrize(("lease", "heartbeat"), TIMINGS)
async def test_a_dead_leaders_job_runs_again_within_the_lease_and_a_second(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    lease: float,
    heartbeat: float,
) -> None:
    """The leader dies holding a job: the worker elected next re-pends it as its lease ends
    and runs it, by its last heartbeat + lock_lease + 1 s whatever the 30 s sweep."""
    settings = _settings(lease, heartbeat)
    victim = WorkerRun(backend, clock, {"hangs_first": hangs_first}, settings)
    await victim.start()
    assert victim.state.leadership.is_leader
    job_id = (await client.enqueue(hangs_first.new_job({"n": 1}, now=clock.now()))).job_id
    await victim.advance(0.5)
    assert await _running_here(client, victim, job_id)
    survivor = WorkerRun(backend, clock, {"hangs_first": hangs_first}, settings)
    await survivor.start()
    await survivor.advance(2.3 * heartbeat)  # beats since the claim: the lock is a beat's

    lease_end = await _lease_end_at_death(client, victim, job_id, lease)
    await _kill(victim)
    await survivor.advance((lease_end - clock.now()).total_seconds() + 1.0)

    reclaimed, rerun = await _rerun_start(client, job_id)
    assert survivor.state.leadership.is_leader
    assert reclaimed - lease_end < timedelta(seconds=0.1)
    assert rerun - lease_end <= timedelta(seconds=1)
    assert (await job(client, job_id)).locked_by is None
    assert await survivor.stop() == 0


@pytest.mark.parametrize(("lease", "heartbeat"), TIMINGS)
async def test_a_dead_non_leaders_job_runs_again_within_the_lease_and_a_second(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    lease: float,
    heartbeat: float,
) -> None:
    """A worker that does not lead dies holding a job: the leader re-pends it as its lease
    ends, and another worker runs it by its last heartbeat + lock_lease + 1 s."""
    settings = _settings(lease, heartbeat)
    leader = WorkerRun(backend, clock, {"other": other}, settings)
    await leader.start()
    assert leader.state.leadership.is_leader
    victim = WorkerRun(backend, clock, {"hangs_first": hangs_first}, settings)
    await victim.start()
    job_id = (await client.enqueue(hangs_first.new_job({"n": 1}, now=clock.now()))).job_id
    await victim.advance(0.5)
    assert await _running_here(client, victim, job_id)
    await victim.advance(2.3 * heartbeat)

    lease_end = await _lease_end_at_death(client, victim, job_id, lease)
    await _kill(victim)
    rerunner = WorkerRun(backend, clock, {"hangs_first": hangs_first}, settings)
    await rerunner.start()
    await rerunner.advance((lease_end - clock.now()).total_seconds() + 1.0)

    reclaimed, rerun = await _rerun_start(client, job_id)
    assert leader.state.leadership.is_leader
    assert reclaimed - lease_end < timedelta(seconds=0.1)
    assert rerun - lease_end <= timedelta(seconds=1)
    assert await rerunner.stop() == 0
    assert await leader.stop() == 0


async def test_a_shorter_lease_claimed_later_is_reclaimed_within_a_second_of_its_end(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """The leader never sleeps past LEASE_CHECK_INTERVAL: a job another worker claims with a
    shorter lease, after the leader saw only a long one, is reclaimed within 1 s of its end."""
    long_id = (await client.enqueue(hangs_first.new_job({"n": 1}, now=clock.now()))).job_id
    await claim_one(client, worker_id="long-lease", queue="default", actor="hangs_first")
    leader = WorkerRun(backend, clock, {"other": other})
    await leader.start()
    assert leader.state.leadership.is_leader
    await leader.advance(10)
    short_id = (await client.enqueue(hangs_first.new_job({"n": 2}, now=clock.now()))).job_id
    [short] = await client.claim(
        ClaimRequest(
            worker_id="short-lease",
            queues=["default"],
            actors=["hangs_first"],
            limit=1,
            lease=timedelta(seconds=2),
            start_now=1,  # it ran: its reclaim records the attempt
        )
    )
    assert short.id == short_id
    await leader.advance(2 + LEASE_CHECK_INTERVAL)
    assert (await job(client, short_id)).status is JobStatus.PENDING
    [record] = await client.attempts(short_id)
    assert record.finished_at - short.lock_expires_at <= timedelta(seconds=LEASE_CHECK_INTERVAL)
    assert (await job(client, long_id)).status is JobStatus.RUNNING
    assert await leader.stop() == 0


class FailingReclaims(StoreProxy):
    """reclaim_expired fails every time; everything else is the memory store's."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.reclaims = 0

    async def reclaim_expired(self, *, now: datetime | None = None) -> ReclaimReport:
        self.reclaims += 1
        raise StoreUnavailable("reclaim refused")


async def test_an_expired_lease_that_stays_is_retried_each_interval_not_in_a_loop(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While a reclaim fails (the lease stays expired) the leader retries it once per
    LEASE_CHECK_INTERVAL, logging each failure, and never spins."""
    await client.enqueue(hangs_first.new_job({"n": 1}, now=clock.now()))
    await claim_one(client, worker_id="dead", queue="default", actor="hangs_first")
    store = FailingReclaims(backend.store())
    leader = WorkerRun(backend, clock, {"other": other}, store=store)
    await leader.start()
    await leader.advance(60.5)  # the lease ended at 60
    assert store.reclaims == 1
    await leader.advance(10 * LEASE_CHECK_INTERVAL)
    assert 10 <= store.reclaims <= 11
    failed = [fields(r)["task"] for r in events_named(caplog, events.LEADER_TASK_FAILED)]
    assert failed == ["leader.reclaim"] * store.reclaims
    assert await leader.stop() == 0
