"""A cron expression in an IANA zone, evaluated by ``cronsim``.

The expression has 5 fields (minute hour day-of-month month day-of-week) or 6,
a leading seconds field first. Ticks are returned as aware UTC instants, so the
rest of TaskQ never does wall-clock arithmetic.

DST (cronsim's rule, which we document and test): a local time the
spring-forward skips fires once, at the first instant after the gap
(``30 2 * * *`` in Europe/Berlin fires at 03:00 CEST that day); a local time
the fall-back repeats fires once, at its first occurrence. A schedule whose
hour field is not a fixed hour (``*/15 * * * *``) follows elapsed time and so
also ticks in the repeated hour's second pass: those are distinct instants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError


@dataclass(frozen=True, slots=True)
class CronExpression:
    """A validated ``expr`` in zone ``tz``; ``ValueError`` naming the problem otherwise."""

    expr: str
    tz: str
    zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            zone = ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"tz {self.tz!r} is not an IANA time zone (e.g. 'Europe/Berlin')"
            ) from None
        object.__setattr__(self, "zone", zone)
        try:
            # Parsing happens when cronsim is built; a start far from any edge of time.
            next(CronSim(self.expr, datetime(2000, 1, 1, tzinfo=zone)))
        except CronSimError as exc:
            raise ValueError(f"cron {self.expr!r}: {exc}") from None
        except StopIteration:  # pragma: no cover - cronsim raises CronSimError instead
            raise ValueError(f"cron {self.expr!r} never fires") from None

    def next_after(self, at: datetime) -> datetime:
        """The first tick strictly after ``at`` (aware), in UTC."""
        tick: datetime = next(CronSim(self.expr, at.astimezone(self.zone)))
        return tick.astimezone(UTC)

    def latest_at_or_before(self, at: datetime) -> datetime:
        """The last tick at or before ``at`` (aware), in UTC."""
        # cronsim's reverse iteration from a whole second yields ticks strictly before it.
        start = at.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)
        tick: datetime = next(CronSim(self.expr, start.astimezone(self.zone), reverse=True))
        return tick.astimezone(UTC)

    def upcoming(self, at: datetime, count: int) -> list[datetime]:
        """The next ``count`` ticks after ``at``, in UTC."""
        ticks: list[datetime] = []
        it = CronSim(self.expr, at.astimezone(self.zone))
        for _ in range(count):
            ticks.append(next(it).astimezone(UTC))
        return ticks


__all__ = ["CronExpression"]
