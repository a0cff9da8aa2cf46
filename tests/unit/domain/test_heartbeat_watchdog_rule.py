"""The timing rule that keeps the watchdog from tripping before a worker isolates itself."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from taskq.domain.settings_rules import TimingSettings, timing_violations


def test_a_command_timeout_longer_than_the_stale_threshold_allows_is_refused() -> None:
    """A 25 s heartbeat command timeout with a 10 s interval lets the heartbeat loop's tick
    get 50 s old, past its 30 s stale threshold: one line naming every variable with its
    value, and values that would work."""
    line, _partition = timing_violations(TimingSettings(heartbeat_command_timeout=25.0))
    assert line.startswith(
        "max(TASKQ_HEARTBEAT_INTERVAL (10.0), TASKQ_HEARTBEAT_COMMAND_TIMEOUT (25.0)) + "
        "TASKQ_HEARTBEAT_COMMAND_TIMEOUT = 50.0"
    )
    assert (
        "max(TASKQ_HEARTBEAT_INTERVAL × TASKQ_WATCHDOG_TICK_GRACE_FACTOR (3.0), "
        "TASKQ_WATCHDOG_STALE_FLOOR (30.0)) = 30.0" in line
    )
    assert "before it isolates itself" in line
    assert line.endswith(
        "use TASKQ_HEARTBEAT_COMMAND_TIMEOUT < 15.0, TASKQ_WATCHDOG_STALE_FLOOR > 50.0 or "
        "TASKQ_WATCHDOG_TICK_GRACE_FACTOR > 5.0 (or TASKQ_WATCHDOG_ENABLED=false)"
    )


def test_the_suggested_values_pass() -> None:
    """Each fix the message suggests, taken a little past its bound, satisfies the rule
    (a larger grace factor not the partition rule's: see test_partition_watchdog_rule)."""

    def own(t: TimingSettings) -> list[str]:
        return [line for line in timing_violations(t) if "stale threshold" in line]

    assert timing_violations(TimingSettings(heartbeat_command_timeout=14.9)) == []
    fixed_floor = TimingSettings(heartbeat_command_timeout=25.0, watchdog_stale_floor=50.1)
    assert timing_violations(fixed_floor) == []
    fixed_factor = TimingSettings(heartbeat_command_timeout=25.0, watchdog_tick_grace_factor=5.01)
    assert own(fixed_factor) == []


def test_an_interval_at_the_stale_threshold_suggests_no_command_timeout() -> None:
    """With a grace factor of 1 and a floor under the interval, no command timeout can
    work: the message suggests only the floor and the factor."""
    t = TimingSettings(watchdog_tick_grace_factor=1.0, watchdog_stale_floor=5.0)
    line, _partition = timing_violations(t)
    assert "= 15.0" in line
    assert line.endswith(
        "use TASKQ_WATCHDOG_STALE_FLOOR > 15.0 or TASKQ_WATCHDOG_TICK_GRACE_FACTOR > 1.5 "
        "(or TASKQ_WATCHDOG_ENABLED=false)"
    )


def test_the_rule_is_off_with_the_watchdog() -> None:
    """With the watchdog disabled nothing can trip, so the rule does not apply."""
    t = TimingSettings(heartbeat_command_timeout=25.0, watchdog_enabled=False)
    assert timing_violations(t) == []


_seconds = st.floats(min_value=0.01, max_value=120.0, allow_nan=False)


@given(
    interval=_seconds,
    timeout=_seconds,
    factor=st.floats(min_value=1.0, max_value=10.0),
    floor=_seconds,
)
def test_refused_exactly_when_the_tick_can_outgrow_the_threshold(
    interval: float, timeout: float, factor: float, floor: float
) -> None:
    """With the other rules satisfied, the line appears iff max(interval, timeout) +
    timeout reaches max(interval × factor, floor), written out plainly."""
    t = TimingSettings(
        heartbeat_interval=interval,
        lock_lease=4 * interval,
        cancellation_grace_period=0.001,
        cleanup_grace_period=0.001,
        termination_grace_period=75.0,
        heartbeat_command_timeout=timeout,
        watchdog_tick_grace_factor=factor,
        watchdog_stale_floor=floor,
    )
    refused = max(interval, timeout) + timeout >= max(interval * factor, floor)
    lines = [line for line in timing_violations(t) if "stale threshold" in line]
    assert bool(lines) is refused
