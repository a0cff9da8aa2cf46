"""Settings rules the worker checks before it starts.

The settings model (in ``app/``) loads ``TASKQ_*`` variables; these pure
functions decide whether the values can work together, so the rules are
tested once here and every message names the variables an operator must fix.

Timing rules, all reported together so one restart fixes them all:

- every period is a finite number > 0, ``max_heartbeat_failures >= 1``;
- ``lock_lease >= 4 × heartbeat_interval``: a live worker whose heartbeats run
  late must not have its jobs reclaimed by the sweep;
- ``cancellation + cleanup < termination - 5``: the shutdown phases must end
  before the termination budget (the watchdog's deadline) runs out;
- ``cancellation + cleanup < lock_lease``: a job being cancelled must still be
  owned when its abandonment is written.
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

#: The environment variable behind each :class:`TimingSettings` field.
ENV_VARS: Final[Mapping[str, str]] = {
    "heartbeat_interval": "TASKQ_HEARTBEAT_INTERVAL",
    "lock_lease": "TASKQ_LOCK_LEASE",
    "cancellation_grace_period": "TASKQ_CANCELLATION_GRACE_PERIOD",
    "cleanup_grace_period": "TASKQ_CLEANUP_GRACE_PERIOD",
    "termination_grace_period": "TASKQ_TERMINATION_GRACE_PERIOD",
    "max_heartbeat_failures": "TASKQ_MAX_HEARTBEAT_FAILURES",
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


def _fmt(value: float) -> str:
    # Round away float noise (0.1 + 0.2) without hiding real differences.
    if not math.isfinite(value):
        return repr(float(value))
    return repr(float(f"{value:.12g}"))


def _named(field: str, value: float) -> str:
    return f"{ENV_VARS[field]} ({_fmt(value)})"


def timing_violations(t: TimingSettings) -> list[str]:
    """One line per broken timing rule (empty when all hold).

    A cross-field rule is only checked when each of its inputs is itself a
    finite positive number, so one bad value yields one line, not a cascade.
    """
    out: list[str] = []
    valid: set[str] = set()
    for field in _PERIODS:
        value: float = getattr(t, field)
        if math.isfinite(value) and value > 0:
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
    return out


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
    "TERMINATION_MARGIN",
    "TimingSettings",
    "check_timing",
    "parse_hhmm_utc",
    "timing_violations",
    "validate_identifier",
]
