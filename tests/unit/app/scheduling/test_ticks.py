"""The missed-tick policy: the latest due tick once, never a burst, nothing too old."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from taskq.app.scheduling.expression import CronExpression
from taskq.app.scheduling.schedule import CronSchedule
from taskq.app.scheduling.ticks import MISSED_TICK_WINDOW, due_tick

HOURLY = CronSchedule(actor="a", expression=CronExpression("0 * * * *", "UTC"))
T = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)


def test_the_tick_at_now_is_due() -> None:
    assert due_tick(HOURLY, T, None) == T


def test_after_an_outage_only_the_latest_missed_tick_is_due_once() -> None:
    """Down from 10:00 to 15:20: five ticks missed, only 15:00 runs, and only once."""
    now = T + timedelta(hours=5, minutes=20)
    assert due_tick(HOURLY, now, T) == T + timedelta(hours=5)
    assert due_tick(HOURLY, now, T + timedelta(hours=5)) is None


def test_a_tick_already_enqueued_is_not_due_again() -> None:
    assert due_tick(HOURLY, T + timedelta(minutes=59), T) is None


def test_a_tick_older_than_the_window_is_not_run() -> None:
    yearly = CronSchedule(actor="a", expression=CronExpression("0 0 1 1 *", "UTC"))
    new_year = datetime(2026, 1, 1, tzinfo=UTC)
    assert due_tick(yearly, new_year + MISSED_TICK_WINDOW, None) == new_year
    assert due_tick(yearly, new_year + MISSED_TICK_WINDOW + timedelta(seconds=1), None) is None


def test_each_tick_has_its_own_key_and_schedules_do_not_share_keys() -> None:
    other = CronSchedule(actor="a", expression=CronExpression("0 * * * *", "Europe/Berlin"))
    assert HOURLY.key_for(T) == f"cron:{HOURLY.fingerprint}:2026-05-01T10:00:00Z"
    assert HOURLY.key_for(T) != HOURLY.key_for(T + timedelta(hours=1))
    assert HOURLY.key_for(T) != other.key_for(T)
