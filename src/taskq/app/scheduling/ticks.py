"""Which tick of a schedule the leader enqueues now: the missed-tick policy.

The leader enqueues the latest tick at or before now, provided it is no older
than ``MISSED_TICK_WINDOW`` and newer than the tick it last enqueued. So:

- ticks missed while no leader ran (or while the leader stalled) are not
  replayed one by one: only the latest of them runs, once; never a burst;
- a tick more than ``MISSED_TICK_WINDOW`` old is not run at all, so a job
  long pruned (30 days by default) is never enqueued a second time;
- whether a tick already ran is the store's to say: every tick is enqueued
  with its idempotency key, so a tick the previous leader enqueued comes back
  as the existing job and nothing is written.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from taskq.app.scheduling.schedule import CronSchedule

MISSED_TICK_WINDOW: Final = timedelta(hours=24)


def due_tick(
    schedule: CronSchedule, now: datetime, last_enqueued: datetime | None
) -> datetime | None:
    """The tick to enqueue at ``now``, or None when there is none."""
    tick = schedule.expression.latest_at_or_before(now)
    if now - tick > MISSED_TICK_WINDOW:
        return None
    if last_enqueued is not None and tick <= last_enqueued:
        return None
    return tick


__all__ = ["MISSED_TICK_WINDOW", "due_tick"]
