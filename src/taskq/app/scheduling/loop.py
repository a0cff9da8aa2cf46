"""The leader's cron loop: enqueue each schedule's due tick, then sleep until the next one.

Exactly one job per tick comes from the store, not from timing: each tick is
enqueued with its idempotency key (:meth:`CronSchedule.key_for`), and the
store keeps one job per actor and key under concurrent enqueuers. So two
leaders at once (one partitioned, not yet aware it lost the lock), or a new
leader re-enqueueing the tick a killed leader already wrote, still leave one
job. Which tick is due is :func:`taskq.app.scheduling.ticks.due_tick`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from taskq.app.scheduling.schedule import CronSchedule
from taskq.app.scheduling.ticks import due_tick
from taskq.domain.job import EnqueueResult, NewJob
from taskq.ports.clock import Clock
from taskq.ports.queue_store import JobEnqueuer

#: Longest sleep between two looks at the wall clock (a clock set forward is noticed).
MAX_SLEEP: Final = 60.0
#: Retry pause after a failed enqueue: the tick stays due until it is written.
RETRY_AFTER: Final = 1.0


class CronActor(Protocol):
    """The part of an ``ActorRef`` the cron loop builds jobs with."""

    def new_job(
        self,
        payload: Mapping[str, Any],
        *,
        scheduled_at: datetime | None = ...,
        idempotency_key: str | None = ...,
        now: datetime,
    ) -> NewJob: ...


@dataclass(frozen=True, slots=True)
class CronEntry:
    schedule: CronSchedule
    actor: CronActor


Enqueued = Callable[[CronSchedule, datetime, EnqueueResult], None]
Failed = Callable[[CronSchedule, datetime, Exception], None]


async def run_cron(
    enqueuer: JobEnqueuer,
    clock: Clock,
    entries: Sequence[CronEntry],
    *,
    on_enqueued: Enqueued,
    on_failed: Failed,
) -> None:
    """Run until cancelled (the leader cancels it when it stops leading)."""
    if not entries:
        return
    last: dict[int, datetime] = {}  # per entry: the tick last written (or found written)
    while True:
        now = clock.now()
        failed = False
        for index, entry in enumerate(entries):
            tick = due_tick(entry.schedule, now, last.get(index))
            if tick is None:
                continue
            try:
                result = await enqueuer.enqueue(_job_for(entry, tick, now), now=now)
            except Exception as exc:
                on_failed(entry.schedule, tick, exc)
                failed = True
                continue
            last[index] = tick
            on_enqueued(entry.schedule, tick, result)
        await clock.sleep(_pause(entries, now, failed))


def _job_for(entry: CronEntry, tick: datetime, now: datetime) -> NewJob:
    schedule = entry.schedule
    return entry.actor.new_job(
        dict(schedule.payload),
        scheduled_at=tick,
        idempotency_key=schedule.key_for(tick),
        now=now,
    )


def _pause(entries: Sequence[CronEntry], now: datetime, failed: bool) -> float:
    soonest = min(entry.schedule.expression.next_after(now) for entry in entries)
    pause = min((soonest - now).total_seconds(), MAX_SLEEP)
    if failed:
        pause = min(pause, RETRY_AFTER)
    return max(pause, 0.0)


def cron_entries(registry: Mapping[str, Any]) -> list[CronEntry]:
    """One entry per ``@cron`` schedule of the actors in ``registry``."""
    return [
        CronEntry(schedule, ref)
        for ref in registry.values()
        for schedule in getattr(ref, "cron_schedules", ())
    ]


__all__ = ["CronActor", "CronEntry", "cron_entries", "run_cron"]
