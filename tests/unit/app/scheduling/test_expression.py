"""Tick computation of a cron expression in an IANA zone, DST included (cronsim's rule)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from taskq.app.scheduling.expression import CronExpression


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_ticks_are_utc_instants_of_the_local_time() -> None:
    """3:00 in Berlin is 02:00 UTC in winter and 01:00 UTC in summer."""
    daily = CronExpression("0 3 * * *", "Europe/Berlin")
    assert daily.next_after(utc("2026-01-10T12:00")) == utc("2026-01-11T02:00")
    assert daily.next_after(utc("2026-07-10T12:00")) == utc("2026-07-11T01:00")


def test_a_sixth_leading_field_is_seconds() -> None:
    every_two = CronExpression("*/2 * * * * *", "UTC")
    assert every_two.next_after(utc("2026-01-01T00:00:01.5")) == utc("2026-01-01T00:00:02")
    assert every_two.upcoming(utc("2026-01-01T00:00:00"), 3) == [
        utc("2026-01-01T00:00:02"),
        utc("2026-01-01T00:00:04"),
        utc("2026-01-01T00:00:06"),
    ]


def test_latest_at_or_before_includes_the_instant_itself() -> None:
    every_two = CronExpression("*/2 * * * * *", "UTC")
    assert every_two.latest_at_or_before(utc("2026-01-01T00:00:04")) == utc("2026-01-01T00:00:04")
    assert every_two.latest_at_or_before(utc("2026-01-01T00:00:05.9")) == utc("2026-01-01T00:00:04")


@pytest.mark.parametrize(
    ("zone", "before", "fires"),
    [
        # Berlin skips 02:00-03:00 CET on 29 March 2026: 02:30 fires once, at 03:00 CEST.
        ("Europe/Berlin", "2026-03-28T12:00", "2026-03-29T01:00"),
        # New York skips 02:00-03:00 EST on 8 March 2026: 02:30 fires once, at 03:00 EDT.
        ("America/New_York", "2026-03-07T12:00", "2026-03-08T07:00"),
    ],
)
def test_a_skipped_local_time_fires_once_right_after_the_gap(
    zone: str, before: str, fires: str
) -> None:
    expr = CronExpression("30 2 * * *", zone)
    ticks = expr.upcoming(utc(before), 2)
    assert ticks[0] == utc(fires)
    assert ticks[1].date() > ticks[0].date()  # then the next day: not a second time


@pytest.mark.parametrize(
    ("zone", "before", "first", "next_day"),
    [
        # Berlin repeats 02:00-03:00 on 25 October 2026: 02:30 CEST (00:30 UTC) only.
        ("Europe/Berlin", "2026-10-24T12:00", "2026-10-25T00:30", "2026-10-26T01:30"),
        # New York repeats 01:00-02:00 on 1 November 2026: 01:30 EDT (05:30 UTC) only.
        ("America/New_York", "2026-10-31T12:00", "2026-11-01T05:30", "2026-11-02T06:30"),
    ],
)
def test_a_repeated_local_time_fires_once(
    zone: str, before: str, first: str, next_day: str
) -> None:
    hour = "2" if zone == "Europe/Berlin" else "1"
    expr = CronExpression(f"30 {hour} * * *", zone)
    assert expr.upcoming(utc(before), 2) == [utc(first), utc(next_day)]


def test_an_every_n_minutes_schedule_ticks_through_both_passes_of_a_repeated_hour() -> None:
    """Not a fixed local time: the repeated hour's instants are distinct, each ticks."""
    expr = CronExpression("0 * * * *", "Europe/Berlin")
    assert expr.upcoming(utc("2026-10-24T23:30"), 3) == [
        utc("2026-10-25T00:00"),  # 02:00 CEST
        utc("2026-10-25T01:00"),  # 02:00 CET
        utc("2026-10-25T02:00"),  # 03:00 CET
    ]


def test_reverse_and_forward_agree_across_a_dst_change() -> None:
    expr = CronExpression("30 2 * * *", "Europe/Berlin")
    tick = expr.next_after(utc("2026-03-28T12:00"))
    assert expr.latest_at_or_before(tick) == tick
    assert expr.latest_at_or_before(utc("2026-03-29T12:00")) == tick


@pytest.mark.parametrize(
    ("expr", "tz", "problem"),
    [
        ("bad", "UTC", "Wrong number of fields"),
        ("61 * * * *", "UTC", "cron '61 \\* \\* \\* \\*'"),
        ("0 0 30 2 *", "UTC", "day-of-month"),
        ("0 3 * * *", "Mars/Olympus", "not an IANA time zone"),
    ],
)
def test_bad_expressions_and_zones_are_refused(expr: str, tz: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        CronExpression(expr, tz)
