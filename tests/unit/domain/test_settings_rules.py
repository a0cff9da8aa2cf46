"""Settings rules: timing invariants, HH:MM schedule times, SQL identifiers."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskq.domain.errors import ConfigurationError, InvalidIdentifierError, SettingsInvariantError
from taskq.domain.settings_rules import (
    ENV_VARS,
    TimingSettings,
    check_timing,
    parse_hhmm_utc,
    timing_violations,
    validate_identifier,
)

# ---------------------------------------------------------------- timing rules


def test_defaults_pass() -> None:
    """The documented defaults satisfy every timing rule."""
    assert timing_violations(TimingSettings()) == []
    check_timing(TimingSettings())


def test_spec_alternative_termination_default_passes() -> None:
    """The guide's other termination default (60s) also passes with default graces."""
    assert timing_violations(TimingSettings(termination_grace_period=60.0)) == []


def test_lock_lease_below_four_heartbeats_is_named_with_values() -> None:
    """A lease shorter than 4 heartbeats yields the line naming both variables and the floor."""
    t = TimingSettings(lock_lease=30.0, heartbeat_interval=10.0, cancellation_grace_period=15.0)
    assert timing_violations(t) == [
        "TASKQ_LOCK_LEASE (30.0) must be >= 4 × TASKQ_HEARTBEAT_INTERVAL (10.0) = 40.0"
    ]


def test_lock_lease_exactly_four_heartbeats_passes() -> None:
    """The lease rule is inclusive: exactly 4 × heartbeat_interval is allowed."""
    assert (
        timing_violations(
            TimingSettings(lock_lease=40.0, heartbeat_interval=10.0, cancellation_grace_period=20.0)
        )
        == []
    )


def test_graces_must_end_before_termination_margin() -> None:
    """cancellation + cleanup must be strictly below termination - 5, naming all three."""
    t = TimingSettings(termination_grace_period=45.0)
    assert timing_violations(t) == [
        "TASKQ_CANCELLATION_GRACE_PERIOD (30.0) + TASKQ_CLEANUP_GRACE_PERIOD (10.0) = 40.0 "
        "must be < TASKQ_TERMINATION_GRACE_PERIOD (45.0) - 5.0 = 40.0"
    ]


def test_graces_just_inside_termination_margin_pass() -> None:
    """A grace total just below termination - 5 is accepted."""
    assert timing_violations(TimingSettings(termination_grace_period=45.5)) == []


def test_graces_must_end_before_lock_lease() -> None:
    """cancellation + cleanup must be strictly below lock_lease, naming all three."""
    t = TimingSettings(lock_lease=40.0, heartbeat_interval=10.0)
    assert timing_violations(t) == [
        "TASKQ_CANCELLATION_GRACE_PERIOD (30.0) + TASKQ_CLEANUP_GRACE_PERIOD (10.0) = 40.0 "
        "must be < TASKQ_LOCK_LEASE (40.0)"
    ]


def test_all_violations_reported_together() -> None:
    """Every broken rule appears at once, in one error, not just the first."""
    t = TimingSettings(
        heartbeat_interval=20.0,
        lock_lease=30.0,
        cancellation_grace_period=30.0,
        cleanup_grace_period=10.0,
        termination_grace_period=40.0,
        max_heartbeat_failures=0,
    )
    with pytest.raises(SettingsInvariantError) as info:
        check_timing(t)
    violations = info.value.violations
    assert len(violations) == 4
    assert violations[0] == "TASKQ_MAX_HEARTBEAT_FAILURES (0) must be >= 1"
    assert violations[1].startswith("TASKQ_LOCK_LEASE (30.0) must be >= 4 ×")
    assert "TASKQ_TERMINATION_GRACE_PERIOD (40.0)" in violations[2]
    assert violations[3].endswith("must be < TASKQ_LOCK_LEASE (30.0)")
    for line in violations:
        assert line in str(info.value)


@pytest.mark.parametrize("field", sorted(set(ENV_VARS) - {"max_heartbeat_failures"}))
@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_each_period_must_be_finite_and_positive(field: str, bad: float) -> None:
    """A zero, negative, NaN or infinite period is one line naming its variable, no cascade."""
    changes: dict[str, Any] = {field: bad}
    t = dataclasses.replace(TimingSettings(), **changes)
    assert timing_violations(t) == [f"{ENV_VARS[field]} ({bad!r}) must be a finite number > 0"]


def test_check_timing_error_is_a_configuration_error() -> None:
    """The raised error is a ConfigurationError so the CLI maps it to exit code 1."""
    with pytest.raises(ConfigurationError, match="TASKQ_HEARTBEAT_INTERVAL"):
        check_timing(TimingSettings(heartbeat_interval=-1.0))


def test_float_noise_is_rounded_in_messages() -> None:
    """Computed sums print without binary float noise (0.1 + 0.2 shows as 0.3)."""
    t = TimingSettings(
        heartbeat_interval=0.05,
        lock_lease=0.2,
        cancellation_grace_period=0.1,
        cleanup_grace_period=0.2,
        termination_grace_period=75.0,
        heartbeat_command_timeout=0.1,
    )
    (line,) = timing_violations(t)
    assert "= 0.3 must be < TASKQ_LOCK_LEASE (0.2)" in line


def _brute(t: TimingSettings) -> bool:
    return (
        all(math.isfinite(getattr(t, f)) and getattr(t, f) > 0 for f in ENV_VARS)
        and t.max_heartbeat_failures >= 1
        and t.lock_lease >= 4 * t.heartbeat_interval
        and t.cancellation_grace_period + t.cleanup_grace_period < t.termination_grace_period - 5
        and t.cancellation_grace_period + t.cleanup_grace_period < t.lock_lease
        and t.heartbeat_command_timeout < t.lock_lease
        # With the watchdog on (the default): the heartbeat isolates before it is stale,
        # and a beat fails before a loop stuck since a partition's cut is stale.
        and max(t.heartbeat_interval, t.heartbeat_command_timeout) + t.heartbeat_command_timeout
        < max(t.heartbeat_interval * t.watchdog_tick_grace_factor, t.watchdog_stale_floor)
        and t.heartbeat_interval + t.heartbeat_command_timeout < t.watchdog_stale_floor
    )


_seconds = st.floats(min_value=-5.0, max_value=200.0, allow_nan=False) | st.sampled_from(
    [0.0, 5.0, 10.0, 40.0, 60.0]
)


@given(
    st.builds(
        TimingSettings,
        heartbeat_interval=_seconds,
        lock_lease=_seconds,
        cancellation_grace_period=_seconds,
        cleanup_grace_period=_seconds,
        termination_grace_period=_seconds,
        max_heartbeat_failures=st.integers(-1, 5),
    )
)
def test_violations_empty_exactly_when_all_rules_hold(t: TimingSettings) -> None:
    """timing_violations is empty iff the rules, written out plainly, all hold."""
    assert (timing_violations(t) == []) is _brute(t)


# ------------------------------------------------------------- schedule times


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("03:00", (3, 0)),
        ("3:00", (3, 0)),
        ("00:00", (0, 0)),
        ("23:59", (23, 59)),
        (" 04:30 ", (4, 30)),
    ],
)
def test_parse_hhmm_accepts_times_of_day(text: str, expected: tuple[int, int]) -> None:
    """Valid HH:MM (or H:MM) UTC times parse to (hour, minute)."""
    assert parse_hhmm_utc(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "24:00",
        "12:60",
        "3",
        "03:0",
        "03:000",
        "0300",
        "03-00",
        "",
        "ab:cd",
        "-1:00",
        "03:00\n00",
        "١٢:٠٠",
        "03:00Z",
    ],
)
def test_parse_hhmm_rejects_everything_else(text: str) -> None:
    """Anything but an in-range HH:MM is a ValueError quoting the text and the expected form."""
    with pytest.raises(ValueError, match="HH:MM") as info:
        parse_hhmm_utc(text, what="TASKQ_PRUNE_SCHEDULE_UTC")
    assert "TASKQ_PRUNE_SCHEDULE_UTC" in str(info.value)
    assert repr(text) in str(info.value)


# ---------------------------------------------------------------- identifiers


@pytest.mark.parametrize("name", ["taskq", "_private", "tenant_42", "public", "a" * 63, "x"])
def test_validate_identifier_returns_valid_names(name: str) -> None:
    """Plain lowercase identifiers up to 63 characters are returned unchanged."""
    assert validate_identifier(name, what="TASKQ_SCHEMA_NAME") == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a" * 64,
        "TaskQ",
        "1taskq",
        "task-q",
        "task q",
        "taskq;drop schema public",
        'taskq"',
        "taskq\n",
        "tâskq",
        "taskq.jobs",
    ],
)
def test_validate_identifier_rejects_malformed_names(name: str) -> None:
    """Anything outside ^[a-z_][a-z0-9_]{0,62}$ is refused, naming the setting and the value."""
    with pytest.raises(InvalidIdentifierError, match="TASKQ_SCHEMA_NAME") as info:
        validate_identifier(name, what="TASKQ_SCHEMA_NAME")
    assert repr(name) in str(info.value)


@pytest.mark.parametrize("name", ["pg_catalog", "pg_taskq", "pg_", "information_schema"])
def test_validate_identifier_rejects_system_schema_names(name: str) -> None:
    """Names Postgres reserves for system schemas are refused."""
    with pytest.raises(InvalidIdentifierError, match="reserved for Postgres"):
        validate_identifier(name, what="TASKQ_SCHEMA_NAME")


@pytest.mark.parametrize("name", ["select", "user", "table", "order", "left", "current_schema"])
def test_validate_identifier_rejects_sql_keywords(name: str) -> None:
    """Reserved SQL keywords are refused, since they cannot qualify a table unquoted."""
    with pytest.raises(InvalidIdentifierError, match="reserved SQL keyword"):
        validate_identifier(name, what="TASKQ_SCHEMA_NAME")


# ------------------------------------------------------------- the new ceilings


def test_a_heartbeat_command_timeout_not_below_the_lease_is_refused() -> None:
    """A beat may wait its command timeout: one that waits the whole lease lets the
    leases it extends expire meanwhile."""
    # The watchdog off: its own rule would refuse so long a command timeout too.
    t = TimingSettings(heartbeat_command_timeout=60.0, watchdog_enabled=False)  # lease 60
    (line,) = timing_violations(t)
    assert line.startswith(
        "TASKQ_HEARTBEAT_COMMAND_TIMEOUT (60.0) must be < TASKQ_LOCK_LEASE (60.0)"
    )
    below = TimingSettings(heartbeat_command_timeout=59.0, watchdog_enabled=False)
    assert timing_violations(below) == []


@pytest.mark.parametrize("field", sorted(ENV_VARS.keys() - {"max_heartbeat_failures"}))
def test_a_period_too_long_for_timers_is_refused_naming_it(field: str) -> None:
    """1e12 s overflows datetime arithmetic (past year 9999) and thread waits: one line
    naming the variable, not an OverflowError at run time."""
    huge: dict[str, Any] = {field: 1e12}
    lines = timing_violations(TimingSettings(**huge))
    (line,) = [v for v in lines if v.startswith(ENV_VARS[field])]
    assert line.startswith(f"{ENV_VARS[field]} (1000000000000.0) must be at most ")
    assert "overflows" in line
    assert "\n" not in line
