"""Settings rules the worker checks before it starts.

The settings model (in ``app/``) loads ``TASKQ_*`` variables; these pure
functions decide whether the values can work together, so the rules are
tested once here and every message names the variables an operator must fix.

Timing rules, all reported together so one restart fixes them all:

- every period is a finite number > 0 and at most :data:`MAX_SECONDS` (about a
  hundred years: larger values overflow timers, ``datetime`` arithmetic and
  Postgres timestamps), ``max_heartbeat_failures >= 1``;
- ``heartbeat_command_timeout < lock_lease``: a beat may take that long, and one
  that takes the whole lease lets the leases it extends expire while it waits;
- ``lock_lease >= 4 × heartbeat_interval``: a live worker whose heartbeats run
  late must not have its jobs reclaimed by the sweep;
- ``cancellation + cleanup < termination - 5``: the shutdown phases must end
  before the termination budget (the watchdog's deadline) runs out;
- ``cancellation + cleanup < lock_lease``: a job being cancelled must still be
  owned when its abandonment is written;
- with the watchdog on, ``max(heartbeat_interval, heartbeat_command_timeout) +
  heartbeat_command_timeout < max(heartbeat_interval × watchdog_tick_grace_factor,
  watchdog_stale_floor)``: the heartbeat loop ticks once per beat, a beat that
  fails takes up to ``heartbeat_command_timeout``, and after the last one the
  isolation write takes up to as long again, so the loop's tick can get that old
  while the worker isolates itself; past the loop's stale threshold the watchdog
  would end the process first (exit 2), leaving its jobs to their leases;
- with the watchdog on, ``heartbeat_interval + heartbeat_command_timeout <
  watchdog_stale_floor``: on a silent partition the other loops (the producer's
  claim, the election) wait on the dead network from the cut, and the watchdog
  stops judging them only once a beat has failed, which takes up to that long
  (the next beat, then its bound); the smallest stale threshold of any loop is
  the floor, so a loop stuck since the cut must not reach it first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from taskq.domain.errors import InvalidIdentifierError, SettingsInvariantError

#: Slack between the end of the cleanup phase and the termination deadline.
TERMINATION_MARGIN: Final = 5.0
#: How many heartbeat intervals a lease must span.
LEASE_HEARTBEATS: Final = 4
#: The longest duration a setting may name, in seconds (100 × 365 days). Beyond some
#: point a value overflows: ``now + lease`` past year 9999, a thread's wait past
#: ``threading.TIMEOUT_MAX``, a Postgres timestamp out of range; this bound is far
#: below all of them and far above any sensible setting.
MAX_SECONDS: Final = 100 * 365 * 86400.0


def too_long(value: float) -> str | None:
    """Why ``value`` seconds is too long for a setting (None when it is not)."""
    if math.isfinite(value) and value > MAX_SECONDS:
        return (
            f"must be at most {MAX_SECONDS:.0f} s (about 100 years): a longer duration "
            "overflows timers and timestamps"
        )
    return None


#: The environment variable behind each :class:`TimingSettings` field.
ENV_VARS: Final[Mapping[str, str]] = {
    "heartbeat_interval": "TASKQ_HEARTBEAT_INTERVAL",
    "lock_lease": "TASKQ_LOCK_LEASE",
    "cancellation_grace_period": "TASKQ_CANCELLATION_GRACE_PERIOD",
    "cleanup_grace_period": "TASKQ_CLEANUP_GRACE_PERIOD",
    "termination_grace_period": "TASKQ_TERMINATION_GRACE_PERIOD",
    "max_heartbeat_failures": "TASKQ_MAX_HEARTBEAT_FAILURES",
}
#: The variables behind the fields only the heartbeat-versus-watchdog rules read (the
#: settings model checks each one's own range).
WATCHDOG_ENV_VARS: Final[Mapping[str, str]] = {
    "heartbeat_command_timeout": "TASKQ_HEARTBEAT_COMMAND_TIMEOUT",
    "watchdog_enabled": "TASKQ_WATCHDOG_ENABLED",
    "watchdog_tick_grace_factor": "TASKQ_WATCHDOG_TICK_GRACE_FACTOR",
    "watchdog_stale_floor": "TASKQ_WATCHDOG_STALE_FLOOR",
}

_PERIODS: Final = (
    "heartbeat_interval",
    "lock_lease",
    "cancellation_grace_period",
    "cleanup_grace_period",
    "termination_grace_period",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingSettings:
    """The timing values the cross-field rules look at, in seconds.

    Defaults are the worker guide's settings reference. Constructing one does
    not validate it; call :func:`check_timing`.
    """

    heartbeat_interval: float = 10.0
    lock_lease: float = 60.0
    cancellation_grace_period: float = 30.0
    cleanup_grace_period: float = 10.0
    termination_grace_period: float = 75.0
    max_heartbeat_failures: int = 3
    heartbeat_command_timeout: float = 5.0
    watchdog_enabled: bool = True
    watchdog_tick_grace_factor: float = 3.0
    watchdog_stale_floor: float = 30.0

    @property
    def heartbeat_stale_after(self) -> float:
        """The watchdog's stale threshold for the heartbeat loop (its tick period is
        ``heartbeat_interval``)."""
        return max(
            self.heartbeat_interval * self.watchdog_tick_grace_factor, self.watchdog_stale_floor
        )

    @property
    def heartbeat_tick_gap(self) -> float:
        """The oldest the heartbeat loop's tick gets while beats fail, up to the end of the
        isolation: a failed beat, then the wait for the next one or the isolation write."""
        timeout = self.heartbeat_command_timeout
        return max(self.heartbeat_interval, timeout) + timeout

    @property
    def store_failure_known_after(self) -> float:
        """The longest a silent partition goes unnoticed: the next beat starts within
        ``heartbeat_interval`` of the cut and is given up ``heartbeat_command_timeout``
        later (the worker then knows its store is failing)."""
        return self.heartbeat_interval + self.heartbeat_command_timeout


def _fmt(value: float) -> str:
    # Round away float noise (0.1 + 0.2) without hiding real differences.
    if not math.isfinite(value):
        return repr(float(value))
    return repr(float(f"{value:.12g}"))


def _named(field: str, value: float) -> str:
    return f"{ENV_VARS.get(field) or WATCHDOG_ENV_VARS[field]} ({_fmt(value)})"


def _usable(value: float, floor: float = 0.0) -> bool:
    return math.isfinite(value) and value > floor


def timing_violations(t: TimingSettings) -> list[str]:
    """One line per broken timing rule (empty when all hold).

    A cross-field rule is only checked when each of its inputs is itself a
    finite positive number, so one bad value yields one line, not a cascade.
    """
    out: list[str] = []
    valid: set[str] = set()
    for field in _PERIODS:
        value: float = getattr(t, field)
        why_long = too_long(value)
        if why_long is not None:
            out.append(f"{_named(field, value)} {why_long}")
        elif math.isfinite(value) and value > 0:
            valid.add(field)
        else:
            out.append(f"{_named(field, value)} must be a finite number > 0")
    if t.max_heartbeat_failures < 1:
        out.append(
            f"{ENV_VARS['max_heartbeat_failures']} ({t.max_heartbeat_failures}) must be >= 1"
        )

    if {"lock_lease", "heartbeat_interval"} <= valid:
        floor = LEASE_HEARTBEATS * t.heartbeat_interval
        if t.lock_lease < floor:
            out.append(
                f"{_named('lock_lease', t.lock_lease)} must be >= {LEASE_HEARTBEATS} × "
                f"{_named('heartbeat_interval', t.heartbeat_interval)} = {_fmt(floor)}"
            )

    timeout = t.heartbeat_command_timeout
    if "lock_lease" in valid and _usable(timeout) and not timeout < t.lock_lease:
        out.append(
            f"{_named('heartbeat_command_timeout', timeout)} must be < "
            f"{_named('lock_lease', t.lock_lease)}: a heartbeat may wait that long, and "
            "one that waits the whole lease lets the leases it extends expire meanwhile"
        )

    graces = {"cancellation_grace_period", "cleanup_grace_period"}
    if graces <= valid:
        total = t.cancellation_grace_period + t.cleanup_grace_period
        graces_text = (
            f"{_named('cancellation_grace_period', t.cancellation_grace_period)} + "
            f"{_named('cleanup_grace_period', t.cleanup_grace_period)} = {_fmt(total)}"
        )
        if "termination_grace_period" in valid:
            budget = t.termination_grace_period - TERMINATION_MARGIN
            if not total < budget:
                out.append(
                    f"{graces_text} must be < "
                    f"{_named('termination_grace_period', t.termination_grace_period)} - "
                    f"{_fmt(TERMINATION_MARGIN)} = {_fmt(budget)}"
                )
        if "lock_lease" in valid and not total < t.lock_lease:
            out.append(f"{graces_text} must be < {_named('lock_lease', t.lock_lease)}")

    if t.watchdog_enabled and "heartbeat_interval" in valid:
        for line in (_heartbeat_watchdog_violation(t), _partition_watchdog_violation(t)):
            if line is not None:
                out.append(line)
    return out


def _heartbeat_watchdog_violation(t: TimingSettings) -> str | None:
    """The line for a heartbeat loop that the watchdog would call stale before the worker
    isolates itself (None when the rule holds or its inputs are out of range)."""
    timeout, factor, floor = (
        t.heartbeat_command_timeout,
        t.watchdog_tick_grace_factor,
        t.watchdog_stale_floor,
    )
    if not (_usable(timeout) and _usable(floor) and math.isfinite(factor) and factor >= 1):
        return None  # the settings model reports the value itself
    interval = t.heartbeat_interval
    gap, threshold = t.heartbeat_tick_gap, t.heartbeat_stale_after
    if gap < threshold:
        return None
    fixes = []
    timeout_limit = min(threshold - interval, threshold / 2)
    if timeout_limit > 0:
        fixes.append(f"{WATCHDOG_ENV_VARS['heartbeat_command_timeout']} < {_fmt(timeout_limit)}")
    fixes.append(f"{WATCHDOG_ENV_VARS['watchdog_stale_floor']} > {_fmt(gap)}")
    fixes.append(f"{WATCHDOG_ENV_VARS['watchdog_tick_grace_factor']} > {_fmt(gap / interval)}")
    return (
        f"max({_named('heartbeat_interval', interval)}, "
        f"{_named('heartbeat_command_timeout', timeout)}) + "
        f"{WATCHDOG_ENV_VARS['heartbeat_command_timeout']} = {_fmt(gap)} (how old the "
        "heartbeat loop's tick gets while its beats time out, up to the isolation) must be "
        f"< its watchdog stale threshold max({ENV_VARS['heartbeat_interval']} × "
        f"{_named('watchdog_tick_grace_factor', factor)}, "
        f"{_named('watchdog_stale_floor', floor)}) = {_fmt(threshold)}: the watchdog would "
        "end the worker (exit 2) before it isolates itself; use "
        f"{', '.join(fixes[:-1])} or {fixes[-1]} (or {WATCHDOG_ENV_VARS['watchdog_enabled']}=false)"
    )


def _partition_watchdog_violation(t: TimingSettings) -> str | None:
    """The line for a loop stuck on a dead network from the cut that the watchdog would
    call stale before a beat fails (None when the rule holds)."""
    interval, timeout, floor = (
        t.heartbeat_interval,
        t.heartbeat_command_timeout,
        t.watchdog_stale_floor,
    )
    if not (_usable(timeout) and _usable(floor)):
        return None  # the settings model reports the value itself
    known = t.store_failure_known_after
    if known < floor:
        return None
    fixes = []
    if floor - timeout > 0:
        fixes.append(f"{ENV_VARS['heartbeat_interval']} < {_fmt(floor - timeout)}")
    if floor - interval > 0:
        fixes.append(f"{WATCHDOG_ENV_VARS['heartbeat_command_timeout']} < {_fmt(floor - interval)}")
    fixes.append(f"{WATCHDOG_ENV_VARS['watchdog_stale_floor']} > {_fmt(known)}")
    return (
        f"{_named('heartbeat_interval', interval)} + "
        f"{_named('heartbeat_command_timeout', timeout)} = {_fmt(known)} (how long a silent "
        "network partition can go before a heartbeat fails) must be < "
        f"{_named('watchdog_stale_floor', floor)}: a claim or an election waiting on the "
        "dead network since the cut would be called stale and the watchdog would end the "
        "worker (exit 2) before it isolates itself; use "
        + (f"{', '.join(fixes[:-1])} or " if len(fixes) > 1 else "")
        + f"{fixes[-1]} (or {WATCHDOG_ENV_VARS['watchdog_enabled']}=false)"
    )


def check_timing(t: TimingSettings) -> None:
    """Raise :class:`SettingsInvariantError` listing every broken timing rule."""
    violations = timing_violations(t)
    if violations:
        raise SettingsInvariantError(violations)


_HHMM = re.compile(r"([0-9]{1,2}):([0-9]{2})")


def parse_hhmm_utc(text: str, *, what: str = "schedule time") -> tuple[int, int]:
    """Parse a daily ``HH:MM`` UTC fire time (e.g. ``TASKQ_PRUNE_SCHEDULE_UTC``).

    Accepts ``H:MM`` or ``HH:MM`` from 00:00 to 23:59, surrounding whitespace
    ignored. Raises :class:`ValueError` naming ``what`` and the bad text.
    """
    match = _HHMM.fullmatch(text.strip())
    if match is not None:
        hour, minute = int(match.group(1)), int(match.group(2))
        if hour <= 23 and minute <= 59:
            return hour, minute
    raise ValueError(f"{what} {text!r} is not a UTC time of day as HH:MM (00:00 to 23:59)")


_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")

# Postgres keywords that cannot name a schema unquoted (reserved, and reserved
# except as a function or type name); a schema called one would break every
# ``schema.table`` reference.
_RESERVED_WORDS: Final = frozenset(
    """
    all analyse analyze and any array as asc asymmetric authorization binary both
    case cast check collate collation column concurrently constraint create cross
    current_catalog current_date current_role current_schema current_time
    current_timestamp current_user default deferrable desc distinct do else end
    except false fetch for foreign freeze from full grant group having ilike in
    initially inner intersect into is isnull join lateral leading left like limit
    localtime localtimestamp natural not notnull null offset on only or order outer
    overlaps placing primary references returning right select session_user similar
    some symmetric system_user table tablesample then to trailing true union unique
    user using variadic verbose when where window with
    """.split()  # noqa: SIM905 - a long word list reads better as text than as a literal
)


def validate_identifier(name: str, *, what: str) -> str:
    """Return ``name`` if it is safe to use as an unquoted SQL identifier.

    Lowercase ASCII letters, digits and ``_``, not starting with a digit, at
    most 63 characters (Postgres truncates longer names silently). Names that
    Postgres reserves (``pg_*``, ``information_schema``) or that are SQL
    keywords are refused. Raises :class:`InvalidIdentifierError` naming
    ``what`` (e.g. ``"TASKQ_SCHEMA_NAME"``).
    """
    if _IDENTIFIER.fullmatch(name) is None:
        raise InvalidIdentifierError(
            f"{what} {name!r} is not a valid identifier: use 1 to 63 lowercase letters, "
            "digits or '_', not starting with a digit"
        )
    if name.startswith("pg_") or name == "information_schema":
        raise InvalidIdentifierError(f"{what} {name!r} is reserved for Postgres system schemas")
    if name in _RESERVED_WORDS:
        raise InvalidIdentifierError(f"{what} {name!r} is a reserved SQL keyword")
    return name


__all__ = [
    "ENV_VARS",
    "LEASE_HEARTBEATS",
    "MAX_SECONDS",
    "TERMINATION_MARGIN",
    "WATCHDOG_ENV_VARS",
    "TimingSettings",
    "check_timing",
    "parse_hhmm_utc",
    "timing_violations",
    "too_long",
    "validate_identifier",
]
