"""The leader's cron loop on a fake clock: one job per tick, whoever leads and however many."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime, timedelta

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, events_named, fields, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.scheduling.decorator import cron
from taskq.app.scheduling.loop import cron_entries, run_cron
from taskq.app.worker import events
from taskq.ports.store_params import JobQuery


class NoArgs(BaseModel):
    pass


@cron("*/10 * * * * *")
@actor
async def beat(payload: NoArgs) -> None:
    return None


REGISTRY = {"beat": beat}
SCHEDULE = beat.cron_schedules[0]


async def keys_by_tick(store: MemoryQueueStore) -> Counter[str]:
    jobs = await store.list_jobs(JobQuery(actor="beat", limit=500))
    return Counter(job.idempotency_key or "" for job in jobs)


def ticks(start: datetime, seconds: int) -> list[str]:
    """The keys of every 10 s tick from ``start`` for ``seconds``."""
    return [SCHEDULE.key_for(start + timedelta(seconds=s)) for s in range(0, seconds + 1, 10)]


async def test_the_leader_enqueues_one_job_per_tick(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    start = clock.now()  # 2030-01-01 00:00:00 UTC: a tick
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    await run.advance(60)
    assert await keys_by_tick(client) == Counter(ticks(start, 60))
    assert await run.stop() == 0


async def test_two_leaders_in_sequence_leave_one_job_per_tick(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """The first leader stops just before a tick; the second, elected after, enqueues
    that tick once and never again the ones the first already wrote."""
    start = clock.now()
    settings = make_settings(heartbeat_interval=1.0)
    first = WorkerRun(backend, clock, REGISTRY, settings)
    second = WorkerRun(backend, clock, REGISTRY, settings)
    await first.start()
    await second.start()
    assert (first.state.leadership.is_leader, second.state.leadership.is_leader) == (True, False)
    await first.advance(29.5)
    assert await first.stop() == 0
    await second.advance(1)  # elected within one heartbeat interval
    assert second.state.leadership.is_leader
    now = clock.now()
    await second.advance(60 - (now - start).total_seconds())
    assert await keys_by_tick(client) == Counter(ticks(start, 60))
    assert await second.stop() == 0


async def test_two_leaders_at_once_still_leave_one_job_per_tick(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Two cron loops on one store at once (a partitioned leader that has not noticed its
    loss yet): the tick's idempotency key keeps one job each, not timing."""
    start = clock.now()
    loops = [
        asyncio.create_task(
            run_cron(
                backend.store(),
                clock,
                cron_entries(REGISTRY),
                on_enqueued=lambda *_: None,
                on_failed=lambda *_: None,
            )
        )
        for _ in range(2)
    ]
    await clock.run_until_idle()
    await clock.advance_async(30)
    for loop in loops:
        loop.cancel()
    await asyncio.gather(*loops, return_exceptions=True)
    assert await keys_by_tick(client) == Counter(ticks(start, 30))


async def test_ticks_missed_without_a_leader_run_once_the_latest(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """No leader from 00:00:05 to 00:01:05: of the six ticks missed only 00:01:00 runs."""
    start = clock.now()
    entries = cron_entries(REGISTRY)
    noop = {"on_enqueued": lambda *_: None, "on_failed": lambda *_: None}
    first = asyncio.create_task(run_cron(backend.store(), clock, entries, **noop))
    await clock.run_until_idle()
    await clock.advance_async(5)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    clock.advance(60)
    second = asyncio.create_task(run_cron(backend.store(), clock, entries, **noop))
    await clock.run_until_idle()
    second.cancel()
    await asyncio.gather(second, return_exceptions=True)
    assert await keys_by_tick(client) == Counter(
        [SCHEDULE.key_for(start), SCHEDULE.key_for(start + timedelta(seconds=60))]
    )


@pytest.mark.parametrize("until_idle", [True, False])
async def test_until_idle_with_cron_schedules_warns_at_start(
    backend: MemoryBackend,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
    until_idle: bool,
) -> None:
    run = WorkerRun(backend, clock, REGISTRY, until_idle=until_idle)
    await run.start()
    warned = events_named(caplog, events.UNTIL_IDLE_WITH_CRON)
    if until_idle:
        assert [fields(r)["actors"] for r in warned] == [["beat"]]
        assert "incompatible" in fields(warned[0])["note"]
    else:
        assert warned == []
    run.worker.request_shutdown()
    await run.finish()
