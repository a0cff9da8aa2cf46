"""The cron loop on the memory adapter and a fake clock: DST days and a failed enqueue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.scheduling.decorator import cron
from taskq.app.scheduling.loop import cron_entries, run_cron
from taskq.domain.errors import StoreUnavailable
from taskq.domain.job import EnqueueResult, NewJob
from taskq.ports.store_params import JobQuery


class NoArgs(BaseModel):
    pass


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@asynccontextmanager
async def cron_running(store: Any, clock: FakeClock, registry: Any) -> AsyncIterator[list[str]]:
    """Run the loop; yields the failures it reports (as text)."""
    failures: list[str] = []
    task = asyncio.create_task(
        run_cron(
            store,
            clock,
            cron_entries(registry),
            on_enqueued=lambda *_: None,
            on_failed=lambda _s, _t, exc: failures.append(str(exc)),
        )
    )
    await clock.run_until_idle()
    try:
        yield failures
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def tick_keys(store: MemoryQueueStore, name: str) -> list[str]:
    jobs = await store.list_jobs(JobQuery(actor=name, limit=100))
    return sorted(job.idempotency_key or "" for job in jobs)


@pytest.mark.parametrize(
    ("zone", "hour", "start", "fires"),
    [
        # Spring forward: the skipped 02:30 runs once, right after the gap (03:00 local).
        ("Europe/Berlin", 2, "2026-03-28T22:00", "2026-03-29T01:00:00Z"),
        ("America/New_York", 2, "2026-03-08T04:00", "2026-03-08T07:00:00Z"),
        # Fall back: the repeated local time runs once, at its first occurrence.
        ("Europe/Berlin", 2, "2026-10-24T22:00", "2026-10-25T00:30:00Z"),
        ("America/New_York", 1, "2026-11-01T03:00", "2026-11-01T05:30:00Z"),
    ],
)
async def test_a_dst_day_has_exactly_one_job_of_a_daily_schedule(
    zone: str, hour: int, start: str, fires: str
) -> None:
    clock = FakeClock(utc(start))
    backend = MemoryBackend(clock=clock)

    @cron(f"30 {hour} * * *", tz=zone)
    @actor
    async def daily(payload: NoArgs) -> None: ...

    schedule = daily.cron_schedules[0]
    # The day before's tick, enqueued at once as the latest missed one (within 24 h).
    before = schedule.key_for(schedule.expression.latest_at_or_before(clock.now()))
    async with cron_running(backend.store(), clock, {"daily": daily}):
        await clock.advance_async(12 * 3600)  # past the DST change and both passes
    assert await tick_keys(backend.store(), "daily") == [
        before,
        f"cron:{schedule.fingerprint}:{fires}",
    ]


class FailingOnce:
    """A store whose first enqueue fails as an unreachable database would."""

    def __init__(self, store: MemoryQueueStore) -> None:
        self.store = store
        self.calls = 0

    async def enqueue(self, job: NewJob, *, now: datetime | None = None) -> EnqueueResult:
        self.calls += 1
        if self.calls == 1:
            raise StoreUnavailable("database away")
        return await self.store.enqueue(job, now=now)


async def test_a_failed_enqueue_is_retried_within_a_second() -> None:
    clock = FakeClock(utc("2030-01-01T00:00"))
    backend = MemoryBackend(clock=clock)

    @cron("0 * * * *")
    @actor
    async def hourly(payload: NoArgs) -> None: ...

    store = FailingOnce(backend.store())
    async with cron_running(store, clock, {"hourly": hourly}) as failures:
        assert failures == ["database away"]
        assert await tick_keys(backend.store(), "hourly") == []
        await clock.advance_async(1)
    assert await tick_keys(backend.store(), "hourly") == [
        hourly.cron_schedules[0].key_for(utc("2030-01-01T00:00"))
    ]
