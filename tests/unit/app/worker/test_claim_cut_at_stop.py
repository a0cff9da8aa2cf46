"""A claim the store never answers does not hold the worker's stop (memory, fake clock).

On a dead network a claim can wait forever, holding the claim lock and so the
shutdown's drain. While the store has answered everything so far the claim runs in
the producer's own task (cheap), and a stop cuts it off after
TASKQ_HEARTBEAT_COMMAND_TIMEOUT.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel
from tests.unit.app.worker.harness import StoreProxy, WorkerRun, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.app.actors import actor
from taskq.domain.job import ClaimedJob
from taskq.ports.store_params import ClaimRequest


class Empty(BaseModel):
    pass


@actor
async def noop(payload: Empty) -> None: ...


class SilentClaims(StoreProxy):
    """Claims that never come back once ``silent`` is set (a silently dropped network)."""

    silent = False
    hung = 0
    cancelled = 0

    async def claim(self, request: ClaimRequest) -> list[ClaimedJob]:
        if not self.silent:
            return await self._inner.claim(request)
        self.hung += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("unreachable")


async def test_a_claim_in_flight_is_cut_off_after_the_grace_and_the_worker_stops(
    backend: MemoryBackend, clock: FakeClock
) -> None:
    store = SilentClaims(backend.store())
    settings = make_settings(heartbeat_command_timeout=2)
    run = WorkerRun(backend, clock, {"noop": noop}, settings, store=store)
    await run.start()
    store.silent = True
    run.state.wake.set()  # the producer claims now, and the claim hangs
    await clock.run_until_idle()
    assert store.hung == 1
    assert not run.state.watch.store_suspect  # the cheap path: awaited in the producer's task
    code = await run.stop(within=60)
    assert code == 0
    assert store.cancelled == 1
