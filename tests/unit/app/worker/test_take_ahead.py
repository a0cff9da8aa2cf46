"""A consumer takes its next job while the previous outcome is written, never unsafely."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, events_named, fields, job, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker import events
from taskq.domain.job import Lease
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish


class Step(BaseModel):
    n: int


RAN: list[int] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    RAN.clear()


@actor
async def step(payload: Step) -> int:
    RAN.append(payload.n)
    return payload.n


class WriteLog:
    """A store that logs when start marks and finishes begin and end, and can hold start marks."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        self._inner = inner
        self.log: list[str] = []
        #: Start marks of these job ids wait until ``release`` is set.
        self.held: set[int] = set()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def mark_started(self, leases: Sequence[Lease]) -> list[Lease]:
        ids = sorted(lease.job_id for lease in leases)
        self.log.append(f"start {ids} begins")
        if self.held & set(ids):
            await self.release.wait()
        lost = await self._inner.mark_started(leases)
        self.log.append(f"start {ids} ends")
        return lost

    async def finish_many(self, outcomes: Sequence[Finish]) -> list[Lease]:
        ids = sorted(outcome.lease.job_id for outcome in outcomes)
        self.log.append(f"finish {ids} begins")
        await asyncio.sleep(0)  # a round trip: the loop runs others meanwhile
        lost = await self._inner.finish_many(outcomes)
        self.log.append(f"finish {ids} ends")
        return lost


async def test_the_next_start_mark_is_sent_beside_the_previous_finish(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """With one consumer, job 2's start mark is sent before job 1's finish has returned."""
    ids = [(await client.enqueue(step.new_job({"n": n}, now=clock.now()))).job_id for n in (1, 2)]
    store = WriteLog(backend.store())
    run = WorkerRun(backend, clock, {"step": step}, make_settings(max_concurrency=1), store=store)
    await run.start()
    assert RAN == [1, 2]
    first, second = ids
    log = store.log
    assert log.index(f"start [{second}] begins") < log.index(f"finish [{first}] ends")
    assert log.index(f"start [{second}] ends") < log.index(f"finish [{second}] begins")
    for job_id in ids:
        assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert await run.stop() == 0


async def test_a_job_taken_ahead_and_drained_before_its_start_mark_never_runs(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The drain re-pends a job taken ahead whose start mark had not landed; it does not run."""
    ids = [(await client.enqueue(step.new_job({"n": n}, now=clock.now()))).job_id for n in (1, 2)]
    first, second = ids
    store = WriteLog(backend.store())
    store.held.add(second)
    run = WorkerRun(backend, clock, {"step": step}, make_settings(max_concurrency=1), store=store)
    await run.start()
    assert RAN == [1]
    assert (await job(client, first)).status is JobStatus.SUCCEEDED
    assert f"start [{second}] begins" in store.log
    taken = await job(client, second)
    assert taken.status is JobStatus.RUNNING
    assert taken.started_at is None

    run.worker.request_shutdown()
    await clock.run_until_idle()
    assert (await job(client, second)).status is JobStatus.PENDING  # re-pended by the drain
    store.release.set()
    assert await run.finish() == 0
    assert RAN == [1]
    drained = await job(client, second)
    assert drained.status is JobStatus.PENDING
    assert drained.attempt == 0
    lost = [fields(r) for r in events_named(caplog, events.JOB_LEASE_LOST)]
    assert [(f["job_id"], f["write"]) for f in lost] == [(second, "start")]
