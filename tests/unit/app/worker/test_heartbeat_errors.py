"""What heartbeat-failed says: what the call waited for when the store tells, no guess
when it does not (fake clock)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

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
from taskq.domain.errors import PoolWaitTimeout
from taskq.ports.store_params import Heartbeat, HeartbeatReport


class Task(BaseModel):
    name: str


@actor
async def noop(payload: Task) -> None:
    return None


class NamedWait(StoreProxy):
    """Every heartbeat ends as a store that bounds it would end it: a PoolWaitTimeout at
    the bound the worker gave (``Heartbeat.timeout``)."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.beats: list[Heartbeat] = []

    async def heartbeat(self, beat: Heartbeat) -> HeartbeatReport:
        self.beats.append(beat)
        assert beat.timeout is not None
        raise PoolWaitTimeout(beat.timeout.total_seconds(), "every connection is in use", size=4)


class Silent(StoreProxy):
    """Heartbeats that never answer nor say why (a store without a bound of its own)."""

    async def heartbeat(self, beat: Heartbeat) -> HeartbeatReport:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


SETTINGS = {"heartbeat_interval": 10, "heartbeat_command_timeout": 5}


async def test_heartbeat_failed_names_what_the_store_waited_for(
    backend: MemoryBackend, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker gives the store a bound 0.6 s inside its own 5 s; the store's
    PoolWaitTimeout is logged with what it waited for."""
    store = NamedWait(backend.store())
    run = WorkerRun(backend, clock, {"noop": noop}, make_settings(**SETTINGS), store=store)
    await run.start()
    await run.advance(10)
    [failed] = events_named(caplog, events.HEARTBEAT_FAILED)
    assert fields(failed)["error"] == (
        "gave up waiting for a free connection from the pool "
        "(TASKQ_HEARTBEAT_COMMAND_TIMEOUT=5s): no connection free in the pool of 4 within "
        "4.4 s: every connection is in use"
    )
    assert [beat.timeout for beat in store.beats] == [timedelta(seconds=4.4)]
    await run.stop()


async def test_heartbeat_failed_does_not_guess_when_the_store_says_nothing(
    backend: MemoryBackend, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A heartbeat the store never answers is given up at TASKQ_HEARTBEAT_COMMAND_TIMEOUT
    and logged as such, without naming a cause it cannot know."""
    store = Silent(backend.store())
    run = WorkerRun(backend, clock, {"noop": noop}, make_settings(**SETTINGS), store=store)
    await run.start()
    await run.advance(15)
    [failed] = events_named(caplog, events.HEARTBEAT_FAILED)
    assert fields(failed)["error"] == (
        "no answer within TASKQ_HEARTBEAT_COMMAND_TIMEOUT=5s; the store did not say what "
        "the call waited for"
    )
    await run.stop()
