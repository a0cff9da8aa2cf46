"""``JobHandle.wait`` rides out a database that fails for a while.

A restart or a dropped connection fails a poll with ``StoreUnavailable``. Before,
``wait`` raised it at once, so a caller waiting minutes for a job lost its wait to a
blip of a second; it now polls again on its schedule and raises the database's
error only when its timeout passes with the database still failing.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import BaseModel
from tests.unit.app.test_client import RecordingClock, run_worker

from taskq.adapters.memory import MemoryBackend, MemoryQueueStore
from taskq.adapters.system_clock import SystemClock
from taskq.app.actors import actor
from taskq.app.client import JobsClient
from taskq.domain.errors import JobNotFound, StoreUnavailable
from taskq.domain.job import Job


class Order(BaseModel):
    order_id: int


class Invoice(BaseModel):
    total: int


@actor
async def bill(payload: Order) -> Invoice:
    return Invoice(total=payload.order_id)


class Flaky(MemoryQueueStore):
    """The memory store whose reads fail while ``down`` is set."""

    down = False
    failed_reads = 0

    async def get(self, job_id: int) -> Job | None:
        if self.down:
            self.failed_reads += 1
            raise StoreUnavailable("connection refused (the database is restarting)")
        return await super().get(job_id)


def _flaky(backend: MemoryBackend) -> Flaky:
    store = backend.store()
    store.__class__ = Flaky  # the same store, its reads made to fail at will
    return store  # type: ignore[return-value]


async def test_wait_polls_through_an_outage_and_returns_the_result() -> None:
    clock = RecordingClock()
    backend = MemoryBackend(clock=clock)
    store = _flaky(backend)
    handle = await JobsClient(store, clock=clock).enqueue(bill, Order(order_id=7))

    async def outage(count: int) -> None:
        store.down = count < 4  # polls 2 to 4 fail
        if count == 4:
            await run_worker(backend, bill, result=Invoice(total=7))

    clock.on_sleep.append(outage)
    assert await handle.wait(timeout=10) == Invoice(total=7)
    assert store.failed_reads == 3


async def test_wait_raises_the_databases_error_when_the_timeout_passes_during_an_outage() -> None:
    clock = RecordingClock()
    store = _flaky(MemoryBackend(clock=clock))
    handle = await JobsClient(store, clock=clock).enqueue(bill, Order(order_id=1))
    store.down = True
    with pytest.raises(StoreUnavailable, match="restarting"):
        await handle.wait(timeout=1.0)
    assert sum(clock.sleeps) == pytest.approx(1.0)
    assert store.failed_reads > 3


async def test_a_job_that_does_not_exist_is_still_reported_at_once() -> None:
    clock = RecordingClock()
    client = JobsClient(MemoryBackend(clock=clock).store(), clock=clock)
    with pytest.raises(JobNotFound):
        await asyncio.wait_for(client.handle(bill, 12345).wait(timeout=10), 5)
    assert clock.sleeps == []


class Hanging(MemoryQueueStore):
    """The memory store whose reads never answer once ``cut`` (a dropped network), nor
    acknowledge their cancellation, until ``end``."""

    cut = False
    end: asyncio.Event | None = None

    async def get(self, job_id: int) -> Job | None:
        if not self.cut:
            return await super().get(job_id)
        assert self.end is not None
        while not self.end.is_set():
            try:
                await self.end.wait()
            except asyncio.CancelledError:
                continue
        raise StoreUnavailable("gone")


async def test_wait_honours_its_timeout_when_a_poll_never_answers() -> None:
    """Before, a read that hung held ``wait`` past its timeout for as long as the read."""
    store = MemoryBackend(clock=SystemClock()).store()  # real time: the bound is real
    store.__class__ = Hanging
    hanging: Hanging = store  # type: ignore[assignment]
    hanging.end = asyncio.Event()
    handle = await JobsClient(store).enqueue(bill, Order(order_id=1))
    hanging.cut = True
    began = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match="did not answer"):
            await handle.wait(timeout=0.3)
        took = time.monotonic() - began
    finally:
        hanging.end.set()
        await asyncio.sleep(0.01)  # the abandoned read ends (and is reaped) before the loop
    assert 0.3 <= took < 2.0, took
