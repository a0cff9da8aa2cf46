"""Unit tests for the watchdog detectors (taskq.domain.watchdog)."""

from __future__ import annotations

import math

import pytest

from taskq.domain.errors import ConfigurationError
from taskq.domain.shutdown import SetShutdownEvent
from taskq.domain.watchdog import (
    TRIP_EVENT,
    TRIP_EXIT_CODE,
    CountSiblingCrash,
    Detector,
    Idle,
    LivenessTable,
    LoopLagDetector,
    LoopTick,
    RaiseSiblingReturned,
    SiblingExit,
    StillAlive,
    Trip,
    WatchdogSettings,
    judge_shutdown_deadline,
    judge_sibling_exit,
    judge_stale_loops,
)

# -- labels and settings ---------------------------------------------------------------


def test_detector_labels_match_the_spec() -> None:
    """Trip labels are exactly the four detector names used in logs and metrics."""
    assert [d.value for d in Detector] == [
        "shutdown_deadline",
        "stale_loop",
        "sibling_contract",
        "loop_lag",
    ]
    assert (TRIP_EVENT, TRIP_EXIT_CODE) == ("worker-watchdog-trip", 2)


def test_settings_defaults() -> None:
    """The documented defaults hold and the watchdog is on by default."""
    s = WatchdogSettings()
    assert (
        s.enabled,
        s.check_interval,
        s.tick_grace_factor,
        s.stale_floor,
        s.dump_interval,
        s.loop_lag_budget,
        s.loop_lag_startup_grace,
    ) == (True, 5.0, 3.0, 30.0, 10.0, 10.0, 30.0)


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("check_interval", 0.0),
        ("stale_floor", -1.0),
        ("dump_interval", math.nan),
        ("loop_lag_budget", math.inf),
        ("loop_lag_startup_grace", 0.0),
        ("tick_grace_factor", 0.0),
    ],
)
def test_settings_reject_non_positive_or_non_finite_values(field: str, bad: float) -> None:
    """Every period must be finite and positive; the error names the variable."""
    with pytest.raises(ConfigurationError, match=f"TASKQ_WATCHDOG_{field.upper()}"):
        WatchdogSettings(**{field: bad})  # type: ignore[arg-type]


def test_settings_reject_grace_factor_below_one() -> None:
    """A tick grace factor below 1 would call an on-time loop stale."""
    with pytest.raises(ConfigurationError, match="TICK_GRACE_FACTOR must be >= 1"):
        WatchdogSettings(tick_grace_factor=0.5)


def test_settings_can_disable_the_watchdog() -> None:
    """enabled=False is a valid setting."""
    assert WatchdogSettings(enabled=False).enabled is False


# -- a. shutdown deadline --------------------------------------------------------------


def deadline(now: float, last_report_at: float | None = None) -> Idle | StillAlive | Trip:
    return judge_shutdown_deadline(
        shutdown_started_at=100.0,
        now=now,
        termination_grace_period=75.0,
        dump_interval=10.0,
        last_report_at=last_report_at,
    )


def test_deadline_idle_before_any_signal() -> None:
    """Without a first signal the deadline detector has nothing to count."""
    verdict = judge_shutdown_deadline(
        shutdown_started_at=None,
        now=1e6,
        termination_grace_period=75.0,
        dump_interval=10.0,
        last_report_at=None,
    )
    assert verdict == Idle()


def test_deadline_counts_down_without_report_before_dump_interval() -> None:
    """Within the first dump interval the countdown runs with no report due."""
    assert deadline(109.0) == StillAlive(elapsed=9.0, remaining=66.0, report_due=False)


def test_deadline_report_due_after_dump_interval_since_first_signal() -> None:
    """The first still-alive report is due a dump interval after the first signal."""
    verdict = deadline(110.0)
    assert isinstance(verdict, StillAlive)
    assert verdict.report_due


def test_deadline_next_report_counts_from_the_last_report() -> None:
    """Later reports are due a dump interval after the previous one."""
    not_due = deadline(125.0, last_report_at=116.0)
    due = deadline(126.0, last_report_at=116.0)
    assert isinstance(not_due, StillAlive)
    assert isinstance(due, StillAlive)
    assert (not_due.report_due, due.report_due) == (False, True)


def test_deadline_trips_at_termination_grace_from_first_signal() -> None:
    """At first signal + termination_grace_period the detector trips with its label."""
    assert isinstance(deadline(174.9), StillAlive)
    verdict = deadline(175.0)
    assert isinstance(verdict, Trip)
    assert verdict.detector is Detector.SHUTDOWN_DEADLINE
    assert verdict.exit_code == 2
    assert "75.0s" in verdict.reason


# -- b. stale loop ticks ---------------------------------------------------------------


def test_loop_allowance_is_the_larger_of_scaled_period_and_floor() -> None:
    """Allowance is max(period × grace factor, stale floor)."""
    assert LoopTick(period=1.0, last_tick=0.0).allowance(3.0, 30.0) == 30.0
    assert LoopTick(period=20.0, last_tick=0.0).allowance(3.0, 30.0) == 60.0


def test_liveness_tick_records_and_ages() -> None:
    """A tick records the loop; tick_ages reports seconds since each loop's last tick, by name."""
    table = LivenessTable().tick("heartbeat", 10.0, 5.0).tick("cron", 1.0, 7.0)
    assert table.tick_ages(12.0) == {"cron": 5.0, "heartbeat": 7.0}
    assert list(table.tick_ages(12.0)) == ["cron", "heartbeat"]


def test_liveness_table_is_immutable() -> None:
    """tick and forget return new tables and leave the original unchanged."""
    empty = LivenessTable()
    one = empty.tick("heartbeat", 10.0, 0.0)
    assert dict(empty.loops) == {}
    assert one.forget("heartbeat") == empty
    assert "heartbeat" in one.loops
    with pytest.raises(TypeError):
        one.loops["x"] = LoopTick(1.0, 0.0)  # type: ignore[index]


def test_forget_unknown_loop_is_a_no_op() -> None:
    """Forgetting a loop that never ticked returns the same table."""
    table = LivenessTable()
    assert table.forget("leader-watchdog") is table


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan])
def test_tick_rejects_unusable_period(bad: float) -> None:
    """A loop must declare a positive, finite period."""
    with pytest.raises(ValueError, match="period"):
        LivenessTable().tick("x", bad, 0.0)


def test_stale_uses_floor_for_fast_loops_and_scaled_period_for_slow_ones() -> None:
    """A loop is stale only once its age strictly exceeds its own allowance."""
    table = LivenessTable().tick("fast", 1.0, 0.0).tick("slow", 20.0, 0.0)
    assert table.stale(30.0, 3.0, 30.0) == []
    assert table.stale(30.5, 3.0, 30.0) == [("fast", 30.5)]
    assert table.stale(60.5, 3.0, 30.0) == [("fast", 60.5), ("slow", 60.5)]


def test_a_new_tick_makes_a_loop_fresh_again() -> None:
    """Ticking resets a loop's age."""
    table = LivenessTable().tick("fast", 1.0, 0.0).tick("fast", 1.0, 40.0)
    assert table.stale(41.0, 3.0, 30.0) == []


def test_forgotten_loop_cannot_go_stale() -> None:
    """A gated loop that forgot itself never trips, however long it idles."""
    table = LivenessTable().tick("leader", 5.0, 0.0).forget("leader")
    assert table.stale(1e6, 3.0, 30.0) == []


def test_judge_stale_loops_trips_naming_the_stale_loops() -> None:
    """The stale-loop detector trips with its label and lists the stale loops."""
    table = LivenessTable().tick("heartbeat", 10.0, 0.0).tick("producer", 1.0, 40.0)
    settings = WatchdogSettings()
    assert judge_stale_loops(table, 30.0, settings) == Idle()
    verdict = judge_stale_loops(table, 45.0, settings)
    assert isinstance(verdict, Trip)
    assert verdict.detector is Detector.STALE_LOOP
    assert "heartbeat (45.0s)" in verdict.reason
    assert "producer" not in verdict.reason


# -- c. sibling contract ---------------------------------------------------------------


def test_sibling_returning_without_shutdown_violates_the_contract() -> None:
    """A clean return with no shutdown in progress sets shutdown_event and raises."""
    verdict = judge_sibling_exit("producer", raised=False, shutdown_in_progress=False)
    assert verdict.outcome is SiblingExit.CONTRACT_VIOLATION
    assert verdict.actions == (SetShutdownEvent(), RaiseSiblingReturned("producer"))
    assert verdict.detector is Detector.SIBLING_CONTRACT


def test_contract_violation_error_names_the_sibling() -> None:
    """The RuntimeError raised for a violation names the sibling."""
    err = RaiseSiblingReturned("heartbeat").error()
    assert isinstance(err, RuntimeError)
    assert "'heartbeat'" in str(err)


@pytest.mark.parametrize("shutting_down", [False, True])
def test_sibling_raising_is_a_crash(shutting_down: bool) -> None:
    """A sibling that raises sets shutdown_event and counts a crash for its loop."""
    verdict = judge_sibling_exit("notify", raised=True, shutdown_in_progress=shutting_down)
    assert verdict.outcome is SiblingExit.CRASH
    assert verdict.actions == (SetShutdownEvent(), CountSiblingCrash(loop="notify"))
    assert verdict.detector is None


def test_sibling_returning_during_shutdown_is_fine() -> None:
    """Returning while a shutdown is in progress is the contract: nothing to do."""
    verdict = judge_sibling_exit("consumer-3", raised=False, shutdown_in_progress=True)
    assert verdict.outcome is SiblingExit.CLEAN
    assert verdict.actions == ()


# -- d. event-loop lag -----------------------------------------------------------------


def lag(**kwargs: float) -> LoopLagDetector:
    return LoopLagDetector(started_at=0.0, budget=10.0, startup_grace=30.0, **kwargs)


def test_lag_detector_takes_budget_and_grace_from_settings() -> None:
    """from_settings copies the loop-lag budget and startup grace."""
    det = LoopLagDetector.from_settings(
        WatchdogSettings(loop_lag_budget=4.0, loop_lag_startup_grace=8.0), started_at=2.0
    )
    assert (det.started_at, det.budget, det.startup_grace, det.grace_ends_at) == (
        2.0,
        4.0,
        8.0,
        10.0,
    )


def test_lag_detector_is_disarmed_during_startup_grace() -> None:
    """Before the startup grace and any liveness tick, no lag can trip."""
    det, verdict = lag().check(29.9)
    assert (det.armed_at, verdict) == (None, Idle())


def test_lag_detector_arms_after_startup_grace() -> None:
    """The startup grace elapsing arms the detector at started_at + grace."""
    det, verdict = lag().check(30.0)
    assert (det.armed_at, verdict) == (30.0, Idle())


def test_lag_detector_arms_on_first_liveness_tick() -> None:
    """A liveness tick before the grace arms the detector early; later ticks change nothing."""
    det = lag().on_liveness_tick(3.0)
    assert det.armed_at == 3.0
    assert det.on_liveness_tick(9.0) is det
    _, verdict = det.check(13.5)
    assert isinstance(verdict, Trip)


def test_tick_after_the_grace_arms_at_the_grace_end() -> None:
    """Whichever comes first: a tick after the grace ended (with no check yet) arms at the end."""
    det = lag().on_liveness_tick(41.0)
    assert det.armed_at == 30.0
    _, verdict = det.check(41.0)
    assert isinstance(verdict, Trip)


def test_blocked_bootstrap_does_not_count_against_the_budget() -> None:
    """Lag is measured from arming, so a loop silent through startup gets a full budget."""
    det, verdict = lag().check(40.0)
    assert verdict == Idle()
    _, verdict = det.check(40.1)
    assert isinstance(verdict, Trip)


def test_lag_trips_when_no_beat_within_budget() -> None:
    """Armed, the detector trips once now - last beat strictly exceeds the budget."""
    det = lag().on_liveness_tick(1.0).beat(5.0)
    _, on_budget = det.check(15.0)
    _, over = det.check(15.1)
    assert on_budget == Idle()
    assert isinstance(over, Trip)
    assert over.detector is Detector.LOOP_LAG
    assert "budget 10s" in over.reason


def test_beats_keep_the_detector_quiet() -> None:
    """Regular beats keep the lag under budget indefinitely."""
    det = lag().on_liveness_tick(0.0)
    for t in range(1, 200, 5):
        det = det.beat(float(t))
        det, verdict = det.check(t + 9.0)
        assert verdict == Idle()


def test_older_beat_never_rewinds_last_beat() -> None:
    """A beat stamped earlier than the last one is ignored."""
    det = lag().beat(5.0)
    assert det.beat(4.0) is det


@pytest.mark.parametrize("armed_at", [-1.0, 30.5])
def test_lag_detector_arm_time_must_lie_within_the_grace(armed_at: float) -> None:
    """armed_at before the start or after the grace end is an illegal state."""
    with pytest.raises(ValueError, match="armed outside"):
        lag(armed_at=armed_at)


@pytest.mark.parametrize("field", ["budget", "startup_grace"])
def test_lag_detector_rejects_non_positive_config(field: str) -> None:
    """Budget and startup grace must be positive."""
    with pytest.raises(ValueError, match=field):
        LoopLagDetector(started_at=0.0, **{field: 0.0})
