"""When the leader's daily sweeps fire: ``HH:MM`` UTC, or a 5-field cron expression in UTC
(:func:`taskq.app.scheduling.sweep_cron.sweep_cron`, evaluated like ``@cron`` schedules)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from taskq.app.scheduling.sweep_cron import sweep_cron
from taskq.domain.settings_rules import parse_hhmm_utc


class Schedule(Protocol):
    def next_after(self, now: datetime) -> datetime:
        """The first fire time strictly after ``now`` (UTC)."""
        ...


@dataclass(frozen=True, slots=True)
class DailyAt:
    """Every day at ``hour:minute`` UTC."""

    hour: int
    minute: int

    @classmethod
    def parse(cls, text: str) -> DailyAt:
        hour, minute = parse_hhmm_utc(text)
        return cls(hour, minute)

    def next_after(self, now: datetime) -> datetime:
        now = now.astimezone(UTC)
        fire = now.replace(hour=self.hour, minute=self.minute, second=0, microsecond=0)
        return fire if fire > now else fire + timedelta(days=1)


def daily_schedule(cron_expr: str | None, hhmm: str) -> Schedule:
    """The cron expression when set, else the ``HH:MM`` UTC daily time."""
    return sweep_cron(cron_expr) if cron_expr else DailyAt.parse(hhmm)


__all__ = ["DailyAt", "Schedule", "daily_schedule"]
