"""The timing rule that lets a silent partition end in isolation, not a watchdog trip.

On a silent partition the producer's claim and the election wait on the dead
network from the cut; the watchdog stops judging them once a beat has failed,
which takes up to ``heartbeat_interval + heartbeat_command_timeout``. That must
come before the smallest stale threshold of any loop, ``watchdog_stale_floor``.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from taskq.domain.settings_rules import TimingSettings, timing_violations


def test_the_defaults_notice_a_partition_well_before_the_stale_floor() -> None:
    """10 s + 5 s = 15 s < 30 s."""
    t = TimingSettings()
    assert t.store_failure_known_after == 15.0
    assert timing_violations(t) == []


def test_a_heartbeat_interval_past_the_floor_is_refused_naming_the_fixes() -> None:
    """A 30 s interval (lease 120 s) keeps the heartbeat's own rule (its threshold is
    90 s) but lets a claim stuck since the cut reach the 30 s floor first."""
    (line,) = timing_violations(TimingSettings(heartbeat_interval=30.0, lock_lease=120.0))
    assert line.startswith(
        "TASKQ_HEARTBEAT_INTERVAL (30.0) + TASKQ_HEARTBEAT_COMMAND_TIMEOUT (5.0) = 35.0"
    )
    assert "must be < TASKQ_WATCHDOG_STALE_FLOOR (30.0)" in line
    assert "before it isolates itself" in line
    assert line.endswith(
        "use TASKQ_HEARTBEAT_INTERVAL < 25.0 or TASKQ_WATCHDOG_STALE_FLOOR > 35.0 "
        "(or TASKQ_WATCHDOG_ENABLED=false)"
    )


def test_a_floor_at_the_limit_is_refused_and_the_suggestions_pass() -> None:
    """Floor 15 s with the default beat (15 s) is refused; each suggested value, taken a
    little past its bound, passes."""
    (line,) = timing_violations(TimingSettings(watchdog_stale_floor=15.0))
    assert line.endswith(
        "use TASKQ_HEARTBEAT_INTERVAL < 10.0, TASKQ_HEARTBEAT_COMMAND_TIMEOUT < 5.0 or "
        "TASKQ_WATCHDOG_STALE_FLOOR > 15.0 (or TASKQ_WATCHDOG_ENABLED=false)"
    )
    for fixed in (
        TimingSettings(watchdog_stale_floor=15.0, heartbeat_interval=9.9, lock_lease=60.0),
        TimingSettings(watchdog_stale_floor=15.0, heartbeat_command_timeout=4.9),
        TimingSettings(watchdog_stale_floor=15.1),
        TimingSettings(watchdog_stale_floor=15.0, watchdog_enabled=False),
    ):
        assert timing_violations(fixed) == [], fixed


def test_both_lines_when_both_rules_fail() -> None:
    """A command timeout of 25 s breaks the heartbeat's own rule and this one: both are
    listed, so one restart fixes them (a larger grace factor alone fixes only the first)."""
    own, partition = timing_violations(TimingSettings(heartbeat_command_timeout=25.0))
    assert "stale threshold" in own
    assert "silent network partition" in partition
    (line,) = timing_violations(
        TimingSettings(heartbeat_command_timeout=25.0, watchdog_tick_grace_factor=5.01)
    )
    assert line == partition


_seconds = st.floats(min_value=0.01, max_value=120.0, allow_nan=False)


@given(interval=_seconds, timeout=_seconds, factor=st.floats(1.0, 10.0), floor=_seconds)
def test_the_timings_pass_exactly_when_a_failed_beat_comes_before_the_floor(
    interval: float, timeout: float, factor: float, floor: float
) -> None:
    """With the other rules satisfied, this rule's line appears iff interval + timeout
    reaches the floor."""
    t = TimingSettings(
        heartbeat_interval=interval,
        lock_lease=4 * interval + timeout,
        cancellation_grace_period=0.001,
        cleanup_grace_period=0.001,
        termination_grace_period=75.0,
        heartbeat_command_timeout=timeout,
        watchdog_tick_grace_factor=factor,
        watchdog_stale_floor=floor,
    )
    lines = [line for line in timing_violations(t) if "silent network partition" in line]
    assert bool(lines) is not (interval + timeout < floor)
