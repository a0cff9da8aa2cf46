"""A job whose outcome write gave up is not kept running forever by the heartbeat."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel
from tests.unit.app.worker.harness import (
    StoreProxy,
    WorkerRun,
    events_named,
    fields,
    job,
    make_settings,
)

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.context import JobContext
from taskq.app.worker import events
from taskq.domain.job import Lease
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Heartbeat, HeartbeatReport, Reschedule


class Item(BaseModel):
    n: int


@actor(queue="work")
async def fails_once(payload: Item, ctx: JobContext[Item]) -> int:
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    return ctx.attempt


class BuggyReschedule(StoreProxy):
    """A store whose first ``reschedule`` raises what no store should (a bug)."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.failed: list[Lease] = []
        self.lapsing: list[tuple[Lease, ...]] = []

    async def reschedule(self, request: Reschedule) -> None:
        if not self.failed:
            self.failed.append(request.lease)
            raise RuntimeError("a bug in the store")
        await self._inner.reschedule(request)

    async def heartbeat(self, beat: Heartbeat) -> HeartbeatReport:
        if beat.let_lapse:
            self.lapsing.append(beat.let_lapse)
        return await self._inner.heartbeat(beat)


async def test_a_job_whose_outcome_write_gave_up_is_reclaimed_after_its_lease(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """The heartbeat lets its lease lapse (it is no longer extended), the leader's sweep
    reclaims it, and it runs again; before, every beat kept it running while the worker lived."""
    store = BuggyReschedule(backend.store())
    settings = make_settings(queues=["work"], heartbeat_interval=5.0, lock_lease=60.0)
    run = WorkerRun(backend, clock, {"fails_once": fails_once}, settings, store=store)
    job_id = (await client.enqueue(fails_once.new_job({"n": 1}, now=clock.now()))).job_id
    await run.start()
    await run.advance(1)
    [lease] = store.failed
    stuck = await job(client, job_id)
    assert (stuck.status, stuck.fencing_token) == (JobStatus.RUNNING, lease.fencing_token)
    expiry = stuck.lock_expires_at
    await run.advance(30)  # six heartbeats
    assert (await job(client, job_id)).lock_expires_at == expiry
    assert store.lapsing
    assert all(lapsing == (lease,) for lapsing in store.lapsing)
    await run.advance(90)  # past the lease, and a sweep after it
    done = await job(client, job_id)
    assert (done.status, done.attempt, done.result) == (JobStatus.SUCCEEDED, 2, 2)
    assert [a.outcome for a in await client.attempts(job_id)] == ["lease_expired", "succeeded"]
    count = len(store.lapsing)
    await run.advance(20)
    assert len(store.lapsing) == count  # no longer this worker's to let lapse
    assert await run.stop() == 0


async def test_the_failed_write_is_logged_with_its_reason(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore, caplog: Any
) -> None:
    store = BuggyReschedule(backend.store())
    run = WorkerRun(
        backend, clock, {"fails_once": fails_once}, make_settings(queues=["work"]), store=store
    )
    job_id = (await client.enqueue(fails_once.new_job({"n": 1}, now=clock.now()))).job_id
    await run.start()
    await run.advance(1)
    [record] = events_named(caplog, events.JOB_WRITE_FAILED)
    assert record.levelno == logging.ERROR
    assert fields(record)["job_id"] == job_id
    assert "a bug in the store" in fields(record)["error"]
    assert await run.stop() == 0
