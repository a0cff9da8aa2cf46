"""The enqueue times (``scheduled_at``, ``schedule_to_close``) say what is wrong with them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from pydantic import BaseModel

from taskq.app.actors import actor
from taskq.domain.job import NewJob
from taskq.domain.retry import RetryPolicy


class Num(BaseModel):
    n: int


@actor
async def ping(payload: Num) -> None:
    return None


NOW = datetime(2030, 1, 1, tzinfo=UTC)


def new_job_with(field: str, value: object) -> NewJob:
    """``ping.new_job`` with ``field`` set to ``value`` (of any type: what is refused)."""
    if field == "scheduled_at":
        return ping.new_job({"n": 1}, now=NOW, scheduled_at=cast(Any, value))
    return ping.new_job({"n": 1}, now=NOW, schedule_to_close=cast(Any, value))


@pytest.mark.parametrize("field", ["scheduled_at", "schedule_to_close"])
def test_a_delay_is_refused_with_the_way_to_write_it(field: str) -> None:
    """A timedelta is a natural thing to pass; it is refused saying how to make the time."""
    with pytest.raises(
        TypeError, match=rf"^{field} must be a timezone-aware datetime \(a delay is now \+ delay"
    ):
        new_job_with(field, timedelta(seconds=5))


@pytest.mark.parametrize("field", ["scheduled_at", "schedule_to_close"])
@pytest.mark.parametrize("value", [5.0, "2030-01-01T00:00:00Z", 1893456000])
def test_a_time_that_is_not_a_datetime_is_refused_naming_its_type(
    field: str, value: object
) -> None:
    with pytest.raises(
        TypeError, match=rf"^{field} must be a timezone-aware datetime, got {type(value).__name__} "
    ):
        new_job_with(field, value)


@pytest.mark.parametrize("field", ["scheduled_at", "schedule_to_close"])
def test_a_naive_datetime_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{field} must be timezone-aware"):
        new_job_with(field, datetime(2030, 1, 2))


def test_aware_times_are_kept() -> None:
    job = ping.new_job(
        {"n": 1},
        now=NOW,
        scheduled_at=NOW + timedelta(minutes=5),
        schedule_to_close=NOW + timedelta(hours=1),
    )
    assert (job.scheduled_at, job.schedule_to_close) == (
        NOW + timedelta(minutes=5),
        NOW + timedelta(hours=1),
    )


@pytest.mark.parametrize("gap", [timedelta(0), timedelta(days=1)])
def test_a_deadline_not_after_the_scheduled_time_is_refused_naming_both(gap: timedelta) -> None:
    """A job whose schedule_to_close is not after its scheduled_at could never start:
    refused, naming both times, instead of being stored to fail at its claim."""
    deadline = NOW + timedelta(days=1)
    with pytest.raises(ValueError, match=r"^schedule_to_close \(2030-01-02T00:00:00\+00:00\)") as e:
        ping.new_job({"n": 1}, now=NOW, scheduled_at=deadline + gap, schedule_to_close=deadline)
    assert f"is not after scheduled_at ({(deadline + gap).isoformat()})" in str(e.value)


def test_a_time_budget_that_ends_before_the_scheduled_time_is_refused() -> None:
    """The deadline an indefinite policy's time_budget sets counts the same."""

    @actor(retry=RetryPolicy(kind="indefinite", time_budget=timedelta(hours=1)))
    async def budgeted(payload: Num) -> None: ...

    with pytest.raises(ValueError, match="the deadline set by the actor's retry time_budget"):
        budgeted.new_job({"n": 1}, now=NOW, scheduled_at=NOW + timedelta(hours=2))
