"""The burst limiter: max_restarts within a sliding window, then give up."""

from __future__ import annotations

from taskq.app.workgroup.config import RestartSpec
from taskq.app.workgroup.restart import BurstLimiter


def test_a_burst_past_the_limit_is_refused() -> None:
    limiter = BurstLimiter(RestartSpec(max_restarts=3, window=60.0))
    assert [limiter.allow(t) for t in (0.0, 1.0, 2.0)] == [True, True, True]
    assert limiter.allow(3.0) is False


def test_restarts_leave_the_window_as_time_passes() -> None:
    limiter = BurstLimiter(RestartSpec(max_restarts=2, window=10.0))
    assert limiter.allow(0.0)
    assert limiter.allow(5.0)
    assert not limiter.allow(9.9)
    assert limiter.allow(10.0)  # the restart at 0 left the window
    assert limiter.recent == 2


def test_zero_restarts_gives_up_on_the_first_crash() -> None:
    assert BurstLimiter(RestartSpec(max_restarts=0)).allow(0.0) is False
