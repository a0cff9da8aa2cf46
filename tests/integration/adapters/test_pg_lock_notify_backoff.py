"""The notifier's reconnect schedule: at once, then initial delay, doubling, capped, reset
on success.

Pure (no database): the bounds every Postgres notifier waits by between
reconnect attempts.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskq.adapters.postgres.notify_backoff import ReconnectBackoff, reconnect_delay

initials = st.floats(min_value=1e-3, max_value=60.0, allow_nan=False)
extra = st.floats(min_value=0.0, max_value=600.0, allow_nan=False)
attempts = st.integers(min_value=1, max_value=10_000)


@given(initial=initials, extra=extra)
def test_the_first_attempt_after_a_loss_does_not_wait(initial: float, extra: float) -> None:
    """Attempt 0 goes at once: a session the server ended usually comes straight back."""
    assert reconnect_delay(0, initial=initial, maximum=initial + extra) == 0.0


@given(initial=initials, extra=extra, attempt=attempts)
def test_delay_stays_between_initial_and_the_cap(
    initial: float, extra: float, attempt: int
) -> None:
    """Every later delay is at least the initial one and never above the cap."""
    cap = initial + extra
    delay = reconnect_delay(attempt, initial=initial, maximum=cap)
    assert initial <= delay <= cap


@given(initial=initials, extra=extra, attempt=attempts)
def test_delay_doubles_until_it_reaches_the_cap(initial: float, extra: float, attempt: int) -> None:
    """Each next delay is twice the previous one, or the cap once doubling would pass it."""
    cap = initial + extra
    now = reconnect_delay(attempt, initial=initial, maximum=cap)
    after = reconnect_delay(attempt + 1, initial=initial, maximum=cap)
    assert after == min(now * 2, cap)


def test_schedule_of_the_documented_defaults() -> None:
    """Defaults give 0, 1, 2, 4, 8, 16, 30, 30 seconds; a success starts again at 0."""
    backoff = ReconnectBackoff()
    delays = [backoff.next_delay() for _ in range(8)]
    assert delays == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    backoff.reset()
    assert backoff.next_delay() == 0.0


@pytest.mark.parametrize(("initial", "maximum"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_unusable_bounds_are_refused(initial: float, maximum: float) -> None:
    """A non-positive initial delay, or a cap below it, is a ValueError at construction."""
    with pytest.raises(ValueError, match="backoff"):
        ReconnectBackoff(initial, maximum)


def test_negative_attempt_is_refused() -> None:
    """Attempts count from 0; a negative one is a caller bug."""
    with pytest.raises(ValueError, match="attempt"):
        reconnect_delay(-1, initial=1.0, maximum=2.0)
