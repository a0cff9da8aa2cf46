"""Exactly once while the store fails at random: before a write lands, or after (reply lost).

A whole worker on the memory adapter with a fake clock drains jobs through a
store that, call after call, fails before doing anything or does the work and
then loses the answer (what a dropped connection does to a committed
statement). Every job must still succeed, each having run exactly once.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Final

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import StoreProxy, WorkerRun, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.context import JobContext
from taskq.domain.errors import StoreUnavailable
from taskq.domain.status import JobStatus

#: The store calls a dropped connection can fail (every one a worker makes while draining).
FAULTY: Final = frozenset(
    {
        "claim",
        "finish_and_claim",
        "finish_many",
        "finish",
        "heartbeat",
        "mark_started",
        "release",
        "reschedule",
    }
)
#: Calls whose committed answer may arrive late (after the heartbeat gave their jobs back).
SLOW: Final = frozenset({"claim", "finish_and_claim"})
JOBS: Final = 120
RUNS: Counter[int] = Counter()


class Step(BaseModel):
    turns: int


@actor(queue="work")
async def step(payload: Step, ctx: JobContext[Step]) -> None:
    RUNS[ctx.job_id] += 1
    for _ in range(payload.turns):
        await asyncio.sleep(0)


class ChaosStore(StoreProxy):
    """``inner`` whose calls in ``FAULTY`` fail now and then, before or after the work;
    now and then a claim's answer arrives only after ``slow_reply`` seconds."""

    def __init__(
        self,
        inner: MemoryQueueStore,
        rng: random.Random,
        rate: float,
        *,
        clock: FakeClock,
        slow_reply: float,
    ) -> None:
        super().__init__(inner)
        self._rng = rng
        self._rate = rate
        self._clock = clock
        self._slow_reply = slow_reply
        self.faults: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in FAULTY:
            return attr
        return self._faulty(name, attr)

    def _faulty(self, name: str, call: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        async def faulty(*args: Any, **kwargs: Any) -> Any:
            roll = self._rng.random()
            if roll < self._rate:
                self.faults[f"{name}: before"] += 1
                raise StoreUnavailable(f"chaos: {name} failed before it ran")
            await self._in_flight()  # the request on its way: others run meanwhile
            result = await call(*args, **kwargs)
            await self._in_flight()  # done at the server, the answer on its way back
            if name in SLOW and self._rng.random() < self._rate:
                self.faults[f"{name}: slow reply"] += 1
                await self._clock.sleep(self._slow_reply)
            if roll < 2 * self._rate:
                self.faults[f"{name}: reply lost"] += 1
                raise StoreUnavailable(f"chaos: {name} ran, its reply was lost")
            return result

        return faulty

    async def _in_flight(self) -> None:
        for _ in range(self._rng.randrange(4)):
            await asyncio.sleep(0)


@pytest.mark.parametrize("seed", range(12))
async def test_every_job_runs_exactly_once_through_random_store_failures(
    seed: int, backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    RUNS.clear()
    rng = random.Random(seed)
    ids = [
        (await client.enqueue(step.new_job({"turns": rng.randrange(4)}, now=clock.now()))).job_id
        for _ in range(JOBS)
    ]
    heartbeat = 1.0
    # A claim answered after more than two beats: its jobs were released as orphans meanwhile.
    store = ChaosStore(backend.store(), rng, rate=0.15, clock=clock, slow_reply=2.5 * heartbeat)
    settings = make_settings(
        queues=["work"],
        heartbeat_interval=heartbeat,
        max_heartbeat_failures=1000,
        max_concurrency=4,
    )
    run = WorkerRun(backend, clock, {"step": step}, settings, store=store, rng=random.Random(seed))
    await run.start()
    for _ in range(1200):
        statuses = [(await client.get(i)).status for i in ids]  # type: ignore[union-attr]
        if all(s is JobStatus.SUCCEEDED for s in statuses):
            break
        await run.advance(0.5)
    assert Counter(s.value for s in statuses) == {"succeeded": JOBS}, store.faults
    assert sum(store.faults.values()) > 0
    twice = {job_id: n for job_id, n in RUNS.items() if n != 1}
    assert twice == {}, store.faults
    assert sorted(RUNS) == sorted(ids)
    assert await run.stop() == 0
