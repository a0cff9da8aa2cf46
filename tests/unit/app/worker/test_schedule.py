"""Daily fire times for the leader's prune and archive-expiry sweeps."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskq.app.scheduling.expression import CronExpression
from taskq.app.scheduling.sweep_cron import sweep_cron
from taskq.app.worker.schedule import DailyAt, daily_schedule


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_daily_time_fires_today_or_tomorrow() -> None:
    """HH:MM fires later today, or tomorrow once today's time has passed (never now)."""
    schedule = DailyAt.parse("03:00")
    assert schedule.next_after(at("2030-01-01T02:59:59")) == at("2030-01-01T03:00:00")
    assert schedule.next_after(at("2030-01-01T03:00:00")) == at("2030-01-02T03:00:00")
    assert schedule.next_after(at("2030-12-31T23:00:00")) == at("2031-01-01T03:00:00")


@pytest.mark.parametrize(
    ("expr", "now", "expected"),
    [
        ("15 3 * * *", "2030-01-01T03:15:00", "2030-01-02T03:15:00"),
        ("*/20 * * * *", "2030-01-01T10:41:30", "2030-01-01T11:00:00"),
        ("0 4 * * mon-fri", "2030-01-04T05:00:00", "2030-01-07T04:00:00"),  # Fri → Mon
        ("0 0 1 */3 *", "2030-02-10T00:00:00", "2030-04-01T00:00:00"),
        ("30 2 29 2 *", "2030-03-01T00:00:00", "2032-02-29T02:30:00"),
        ("0 12 1 * 0", "2030-01-02T00:00:00", "2030-01-06T12:00:00"),  # dom OR dow (Sunday)
        ("0 6 * * 7", "2030-01-01T00:00:00", "2030-01-06T06:00:00"),  # 7 is Sunday too
    ],
)
def test_cron_next_fire_time(expr: str, now: str, expected: str) -> None:
    """5-field cron expressions fire at the next matching minute after now, in UTC."""
    assert sweep_cron(expr).next_after(at(now)) == at(expected)


@pytest.mark.parametrize(
    "expr", ["* * *", "0 3 * * * *", "61 * * * *", "0 0 31 2 *", "*/0 * * * *", "x * * * *"]
)
def test_bad_cron_is_refused(expr: str) -> None:
    """Malformed, never-firing or 6-field expressions raise ValueError naming the expression."""
    with pytest.raises(ValueError, match=r"cron"):
        sweep_cron(expr)


def test_cron_expression_wins_over_the_daily_time() -> None:
    """daily_schedule uses the cron expression when set, else HH:MM."""
    assert daily_schedule("0 5 * * *", "03:00") == CronExpression("0 5 * * *", "UTC")
    assert daily_schedule(None, "03:00") == DailyAt(3, 0)


@given(
    minute=st.integers(0, 59),
    hour=st.integers(0, 23),
    start=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
)
def test_daily_cron_and_hhmm_agree(minute: int, hour: int, start: datetime) -> None:
    """'M H * * *' and 'HH:MM' name the same fire times."""
    now = start.replace(tzinfo=UTC)
    cron = sweep_cron(f"{minute} {hour} * * *").next_after(now)
    daily = DailyAt(hour, minute).next_after(now)
    assert cron == daily
    assert cron > now


def test_a_question_mark_in_a_day_field_means_any() -> None:
    """``?`` (as in Quartz) is "any" in day-of-month and day-of-week, nowhere else."""
    assert sweep_cron("0 3 ? * mon") == sweep_cron("0 3 * * mon")
    assert sweep_cron("0 3 1 * ?") == sweep_cron("0 3 1 * *")
    with pytest.raises(ValueError, match="cron '\\? 3 \\* \\* \\*'"):
        sweep_cron("? 3 * * *")
