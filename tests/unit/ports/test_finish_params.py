"""``Finish.restamped``: the copy the worker makes of every terminal write as it leaves."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta

import pytest

from taskq.domain.job import Lease
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish


def _finish() -> Finish:
    return Finish(
        lease=Lease(7, 3),
        status=JobStatus.FAILED,
        result={"k": [1, 2]},
        error="bad\x00byte",
        error_class="ValueError",
        result_ttl=timedelta(hours=1),
        started_ago=timedelta(milliseconds=5),
        now=datetime(2026, 1, 2, tzinfo=UTC),
    )


def test_restamped_changes_started_ago_and_keeps_every_other_field() -> None:
    before = _finish()
    after = before.restamped(timedelta(milliseconds=9))
    assert after.started_ago == timedelta(milliseconds=9)
    assert before.started_ago == timedelta(milliseconds=5)  # the original is untouched
    for field in fields(Finish):
        if field.name != "started_ago":
            assert getattr(after, field.name) == getattr(before, field.name), field.name
    assert after.error == "bad\\x00byte"  # escaped once, by the constructor, not again
    assert after == Finish(
        lease=before.lease,
        status=before.status,
        result=before.result,
        error="bad\x00byte",
        error_class=before.error_class,
        result_ttl=before.result_ttl,
        started_ago=timedelta(milliseconds=9),
        now=before.now,
    )


def test_restamped_refuses_a_negative_started_ago_as_the_constructor_does() -> None:
    with pytest.raises(ValueError, match="started_ago must be >= 0"):
        _finish().restamped(timedelta(microseconds=-1))


def test_restamped_is_still_frozen() -> None:
    after = _finish().restamped(timedelta(0))
    with pytest.raises(AttributeError):
        after.started_ago = timedelta(1)  # type: ignore[misc]
