"""The producer claims in batches of at least half the local queue while consumers are busy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.domain.job import ClaimedJob
from taskq.ports.store_params import ClaimRequest


class Item(BaseModel):
    n: int


GATE: list[asyncio.Semaphore] = []


@actor
async def gated(payload: Item) -> None:
    await GATE[0].acquire()


@pytest.fixture(autouse=True)
async def _gate() -> AsyncIterator[None]:
    GATE[:] = [asyncio.Semaphore(0)]
    yield
    GATE.clear()


class ClaimLog:
    """A store that records the limit of every claim."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        self._inner = inner
        self.limits: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def claim(self, request: ClaimRequest) -> list[ClaimedJob]:
        self.limits.append(request.limit)
        return await self._inner.claim(request)


async def test_a_busy_worker_claims_only_once_half_the_queue_is_free(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """With consumers busy, one freed slot of four claims nothing; two freed slots claim two."""
    for n in range(20):
        await client.enqueue(gated.new_job({"n": n}, now=clock.now()))
    store = ClaimLog(backend.store())
    settings = make_settings(max_concurrency=4, notify_enabled=False, poll_interval=60.0)
    run = WorkerRun(backend, clock, {"gated": gated}, settings, store=store)
    await run.start()
    assert store.limits == [4, 4]  # four running, four waiting in the local queue
    GATE[0].release()
    await clock.run_until_idle()
    assert store.limits == [4, 4]
    GATE[0].release()
    await clock.run_until_idle()
    assert store.limits == [4, 4, 2]
    for _ in range(20):
        GATE[0].release()
    await clock.run_until_idle()
    assert await run.stop() == 0
