"""Jobs claimed for this worker that it never received (a claim whose reply was lost)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import (
    WorkerRun,
    claim_one,
    events_named,
    fields,
    job,
    make_settings,
)

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker import events
from taskq.domain.status import JobStatus


class Item(BaseModel):
    n: int


GATE: list[asyncio.Event] = []


@pytest.fixture(autouse=True)
async def _gate() -> AsyncIterator[None]:
    GATE[:] = [asyncio.Event()]
    yield
    GATE[0].set()
    GATE.clear()


@actor(queue="work")
async def slow(payload: Item) -> None:
    await GATE[0].wait()


@actor(queue="elsewhere")
async def remote(payload: Item) -> None:
    """Registered, but on a queue this worker does not consume."""


async def test_a_job_claimed_for_the_worker_but_never_received_is_given_back(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its lease is not extended forever: after two heartbeats it is pending again, its
    attempt refunded, with a released attempt record and a job-orphan-released warning."""
    settings = make_settings(queues=["work"], heartbeat_interval=1.0)
    run = WorkerRun(backend, clock, {"slow": slow, "remote": remote}, settings)
    await run.start()
    job_id = (await client.enqueue(remote.new_job({"n": 1}, now=clock.now()))).job_id
    # The claim committed for this worker; its answer never reached it.
    lost = await claim_one(client, worker_id=run.state.worker_id, queue="elsewhere", actor="remote")
    await run.advance(1)
    assert (await job(client, job_id)).status is JobStatus.RUNNING  # one beat: a suspect
    await run.advance(1)
    released = await job(client, job_id)
    assert (released.status, released.attempt, released.locked_by) == (
        JobStatus.PENDING,
        0,
        None,
    )
    assert [a.outcome for a in await client.attempts(job_id)] == ["released"]
    [warning] = events_named(caplog, events.JOB_ORPHAN_RELEASED)
    assert warning.levelno == logging.WARNING
    assert fields(warning)["job_id"] == job_id
    assert fields(warning)["fencing_token"] == lost.fencing_token
    await run.advance(5)
    assert len(events_named(caplog, events.JOB_ORPHAN_RELEASED)) == 1
    assert await run.stop() == 0


async def test_jobs_the_worker_holds_are_never_taken_for_orphans(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A running job and one waiting in the local queue (neither marked started for a
    while) keep their leases through many heartbeats, then finish normally."""
    settings = make_settings(queues=["work"], heartbeat_interval=1.0, max_concurrency=1)
    ids = [(await client.enqueue(slow.new_job({"n": n}, now=clock.now()))).job_id for n in range(2)]
    run = WorkerRun(backend, clock, {"slow": slow}, settings)
    await run.start()
    assert [(await job(client, i)).status for i in ids] == [JobStatus.RUNNING] * 2
    await run.advance(10)
    assert [(await job(client, i)).status for i in ids] == [JobStatus.RUNNING] * 2
    assert events_named(caplog, events.JOB_ORPHAN_RELEASED) == []
    GATE[0].set()
    await clock.run_until_idle()
    assert [(await job(client, i)).status for i in ids] == [JobStatus.SUCCEEDED] * 2
    assert await run.stop() == 0
