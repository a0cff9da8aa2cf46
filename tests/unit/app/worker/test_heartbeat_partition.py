"""Heartbeats on a silently dropped connection (fake clock): bounded, then isolate-self."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import (
    StoreProxy,
    WorkerRun,
    events_named,
    fields,
    make_settings,
)

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker import events


class Task(BaseModel):
    name: str


@actor
async def forever(payload: Task) -> None:
    await asyncio.Event().wait()


class Blackholed(StoreProxy):
    """Heartbeats never answer, and (as on a dead socket) their cancellation hangs too
    until the test ends: only giving the call up bounds a beat."""

    def __init__(self, inner: MemoryQueueStore, cut: asyncio.Event) -> None:
        super().__init__(inner)
        self.cut = cut
        self.end = asyncio.Event()

    async def heartbeat(self, beat: object) -> object:
        if not self.cut.is_set():
            return await self._inner.heartbeat(beat)  # type: ignore[arg-type]
        while not self.end.is_set():
            try:
                await self.end.wait()
            except asyncio.CancelledError:
                continue  # a cancel request that is never acknowledged
        raise ConnectionResetError("gone")


@pytest.mark.parametrize(
    ("failures", "lease", "isolated_after"),
    [
        # More than max_heartbeat_failures (3) failed beats: the fourth isolates.
        (3, 120.0, 4),
        # Failures allowed past the lease: the worker isolates once the next beat
        # could not end before the leases do (beats every 10 s, each given up after 5 s).
        (10, 60.0, 3),
    ],
)
async def test_a_blackholed_heartbeat_is_given_up_and_the_worker_isolates_before_the_lease(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
    failures: int,
    lease: float,
    isolated_after: int,
) -> None:
    await client.enqueue(forever.new_job({"name": "x"}, now=clock.now()))
    cut = asyncio.Event()
    store = Blackholed(backend.store(), cut)
    run = WorkerRun(
        backend,
        clock,
        {"forever": forever},
        make_settings(
            heartbeat_interval=10,
            heartbeat_command_timeout=5,
            lock_lease=lease,
            max_heartbeat_failures=failures,
        ),
        store=store,
    )
    try:
        await run.start()
        await run.advance(10)  # one good beat: the leases run to now + lease
        assert run.state.active.busy == 1
        cut.set()
        extended = clock.monotonic()
        code = await run.finish(within=lease)
        isolated_at = clock.monotonic()
    finally:
        store.end.set()
    assert code == 1
    [isolated] = events_named(caplog, events.WORKER_ISOLATED)
    assert fields(isolated)["consecutive_failures"] == isolated_after
    assert isolated_at - extended < lease
