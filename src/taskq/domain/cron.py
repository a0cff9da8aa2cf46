"""A 5-field cron expression, evaluated in UTC (the leader's daily sweeps).

Fields are minute, hour, day-of-month, month, day-of-week, each ``*``, a
number, a range ``a-b``, a step ``*/n`` / ``a-b/n`` / ``a/n``, or a comma list
of those; months and weekdays also take names (``jan``, ``mon``), and weekday
7 is Sunday like 0. As in classic cron, when both day-of-month and day-of-week
are restricted a day matching either fires.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

_MONTHS: Final = {
    name: i
    for i, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_WEEKDAYS: Final = {
    name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))
}
#: Give up looking for a matching minute after this long (e.g. ``0 0 30 2 *``).
_HORIZON: Final = timedelta(days=366 * 5)


def _field(text: str, low: int, high: int, names: dict[str, int] | None = None) -> frozenset[int]:
    def number(token: str) -> int:
        token = token.lower()
        if names is not None and token in names:
            return names[token]
        if not token.isdigit():
            raise ValueError(f"{token!r} is not a number")
        return int(token)

    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = number(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"step must be >= 1 in {part!r}")
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = number(first), number(last)
        else:
            start = number(base)
            end = high if step_text else start
        if not (low <= start <= high and low <= end <= high and start <= end):
            raise ValueError(f"{part!r} is outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class Cron:
    """A parsed 5-field cron expression, evaluated in UTC."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, expr: str) -> Cron:
        parts = expr.split()
        if len(parts) != 5:
            raise ValueError(f"{expr!r} is not a 5-field cron expression")
        # "?" (any) is accepted in the two day fields only, as "*".
        day_text, weekday_text = (("*" if p == "?" else p) for p in (parts[2], parts[4]))
        try:
            weekdays = _field(weekday_text, 0, 7, _WEEKDAYS)
            return cls(
                minutes=_field(parts[0], 0, 59),
                hours=_field(parts[1], 0, 23),
                days=_field(day_text, 1, 31),
                months=_field(parts[3], 1, 12, _MONTHS),
                weekdays=frozenset(d % 7 for d in weekdays),
                any_day=parts[2] in ("*", "?"),
                any_weekday=parts[4] in ("*", "?"),
            )
        except ValueError as exc:
            raise ValueError(f"cron {expr!r}: {exc}") from None

    def _day_matches(self, at: datetime) -> bool:
        day_ok = at.day in self.days
        weekday_ok = (at.isoweekday() % 7) in self.weekdays
        if self.any_day:
            return weekday_ok
        if self.any_weekday:
            return day_ok
        return day_ok or weekday_ok

    def next_after(self, now: datetime) -> datetime:
        now = now.astimezone(UTC)
        at = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = now + _HORIZON
        while at <= limit:
            if at.month not in self.months:
                month_start = at.replace(day=1, hour=0, minute=0)
                at = (month_start + timedelta(days=32)).replace(day=1)
            elif not self._day_matches(at):
                at = at.replace(hour=0, minute=0) + timedelta(days=1)
            elif at.hour not in self.hours:
                at = at.replace(minute=0) + timedelta(hours=1)
            elif at.minute not in self.minutes:
                at += timedelta(minutes=1)
            else:
                return at
        raise ValueError("the cron expression never fires")

    @classmethod
    def checked(cls, expr: str, now: datetime) -> Cron:
        """Parse ``expr`` and check that it fires after ``now``; ``ValueError`` naming the
        problem otherwise (a setting that could never run its sweep)."""
        cron = cls.parse(expr)
        try:
            cron.next_after(now)
        except ValueError:
            raise ValueError(
                f"cron {expr!r} never fires (no date matches its day and month fields)"
            ) from None
        return cron


__all__ = ["Cron"]
