"""In-worker watchdog: four detectors as pure verdicts over monotonic timestamps.

The runtime feeds them ``clock.monotonic()`` and acts on the verdicts. A
:class:`Trip` means: log ``worker-watchdog-trip`` at CRITICAL labelled by
``detector``, count ``taskq.worker.watchdog_trips_total{detector}``, dump every
live asyncio task, flush, ``os._exit(2)`` with no further awaits::

    shutdown deadline   shutdown_started_at ──(dump_interval)──▶ StillAlive(report_due)
                        ... ──(termination_grace_period)──▶ Trip(shutdown_deadline)

    stale loop ticks    per loop:  tick ──▶ age > max(period × grace_factor, floor)
                                            ──▶ Trip(stale_loop)

    sibling contract    returned, no shutdown ──▶ SetShutdownEvent + RaiseSiblingReturned
                        raised                ──▶ SetShutdownEvent + CountSiblingCrash
                        returned in shutdown  ──▶ fine

    event-loop lag      started ──(startup grace | first liveness tick)──▶ armed
                        armed and now − max(last_beat, armed_at) > budget ──▶ Trip(loop_lag)

``WatchdogSettings.enabled`` switches off the shutdown-deadline, stale-loop
and loop-lag detectors only. The sibling contract is always armed: a sibling
that silently returns leaves the worker running half-staffed, which no
setting makes acceptable. A contract violation is labelled
``sibling_contract`` but is not a :class:`Trip`: the runtime raises instead
of ``os._exit`` so the TaskGroup unwinds and the worker exits non-zero.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Final, TypeAlias

from taskq.domain.errors import ConfigurationError
from taskq.domain.shutdown import SetShutdownEvent

#: Structured-log event name of a trip.
TRIP_EVENT: Final = "worker-watchdog-trip"
#: The process exit code after a trip.
TRIP_EXIT_CODE: Final = 2
TRIPS_METRIC: Final = "taskq.worker.watchdog_trips_total"
SIBLING_CRASHES_METRIC: Final = "taskq.worker.sibling_crashes_total"


class Detector(StrEnum):
    """The ``detector`` label of trips and of ``watchdog_trips_total``."""

    SHUTDOWN_DEADLINE = "shutdown_deadline"
    STALE_LOOP = "stale_loop"
    SIBLING_CONTRACT = "sibling_contract"
    LOOP_LAG = "loop_lag"


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchdogSettings:
    """Watchdog tuning, in seconds (``tick_grace_factor`` is a multiplier).

    Defaults and why:

    - ``check_interval=5.0``: stale-loop sweep cadence; a hang is caught
      within ``stale allowance + 5s``.
    - ``tick_grace_factor=3.0``: a loop may miss two ticks before it is stale.
    - ``stale_floor=30.0``: fast loops (1s cadence) still get 30s, so a slow
      database round trip or GC pause never trips them.
    - ``dump_interval=10.0``: still-alive reports during a shutdown, frequent
      enough to see what hangs within the default 75s budget.
    - ``loop_lag_budget=10.0``: an event loop blocked for 10s has stopped
      heartbeating in practice (heartbeat_interval is 10s).
    - ``loop_lag_startup_grace=30.0``: imports and bootstrap may block the
      loop legitimately before the first liveness tick.

    Raises :class:`ConfigurationError` unless every period is finite and
    ``> 0`` and ``tick_grace_factor >= 1`` (a smaller factor would call a loop
    that ticks exactly on time stale).
    """

    enabled: bool = True
    check_interval: float = 5.0
    tick_grace_factor: float = 3.0
    stale_floor: float = 30.0
    dump_interval: float = 10.0
    loop_lag_budget: float = 10.0
    loop_lag_startup_grace: float = 30.0

    def __post_init__(self) -> None:
        problems: list[str] = []
        for f in fields(self):
            if f.name == "enabled":
                continue
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                problems.append(f"TASKQ_WATCHDOG_{f.name.upper()} must be > 0, got {value!r}")
        if not problems and self.tick_grace_factor < 1:
            problems.append(
                f"TASKQ_WATCHDOG_TICK_GRACE_FACTOR must be >= 1, got {self.tick_grace_factor!r}"
            )
        if problems:
            raise ConfigurationError("; ".join(problems))


# -- verdicts --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Idle:
    """Nothing to do."""


@dataclass(frozen=True, slots=True)
class StillAlive:
    """Shutdown is counting down; when ``report_due``, log which siblings are alive."""

    elapsed: float
    remaining: float
    report_due: bool


@dataclass(frozen=True, slots=True)
class Trip:
    """The process is wedged: dump tasks and ``os._exit(exit_code)``."""

    detector: Detector
    reason: str
    exit_code: int = TRIP_EXIT_CODE


# -- a. shutdown deadline --------------------------------------------------------------


def judge_shutdown_deadline(
    *,
    shutdown_started_at: float | None,
    now: float,
    termination_grace_period: float,
    dump_interval: float,
    last_report_at: float | None,
) -> Idle | StillAlive | Trip:
    """Judge the termination budget, anchored on the first signal.

    Idle before any signal. Trips once ``now - shutdown_started_at >=
    termination_grace_period``. Otherwise a still-alive report is due once
    ``dump_interval`` has passed since the last report (or since the first
    signal when none was made); the caller records ``now`` as the new
    ``last_report_at`` when it reports.
    """
    if shutdown_started_at is None:
        return Idle()
    elapsed = max(0.0, now - shutdown_started_at)
    if elapsed >= termination_grace_period:
        return Trip(
            Detector.SHUTDOWN_DEADLINE,
            f"shutdown still running {elapsed:.1f}s after the first signal "
            f"(termination_grace_period={termination_grace_period:g}s)",
        )
    since_report = now - (shutdown_started_at if last_report_at is None else last_report_at)
    return StillAlive(
        elapsed=elapsed,
        remaining=termination_grace_period - elapsed,
        report_due=since_report >= dump_interval,
    )


# -- b. stale loop ticks ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoopTick:
    """A loop's declared cadence and when it last ticked."""

    period: float
    last_tick: float

    def allowance(self, grace_factor: float, stale_floor: float) -> float:
        """How old the tick may get before the loop is stale."""
        return max(self.period * grace_factor, stale_floor)


@dataclass(frozen=True, slots=True)
class LivenessTable:
    """The last tick of every interval-driven loop that opted in.

    Immutable: :meth:`tick` and :meth:`forget` return a new table, which the
    runtime's one owner (the liveness registry) swaps in.
    """

    loops: Mapping[str, LoopTick] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "loops", MappingProxyType(dict(self.loops)))

    def __repr__(self) -> str:
        return f"LivenessTable({dict(self.loops)!r})"

    def tick(self, name: str, period: float, now: float) -> LivenessTable:
        """Record one iteration of ``name``, which runs every ``period`` seconds."""
        if not math.isfinite(period) or period <= 0:
            raise ValueError(f"loop {name!r}: period must be > 0, got {period!r}")
        return LivenessTable({**self.loops, name: LoopTick(period, now)})

    def forget(self, name: str) -> LivenessTable:
        """Stop watching ``name`` (its gate closed, e.g. no longer leader)."""
        if name not in self.loops:
            return self
        return LivenessTable({k: v for k, v in self.loops.items() if k != name})

    def only(self, names: Collection[str]) -> LivenessTable:
        """The table of just the loops in ``names`` (those still judged while the rest
        are excused, e.g. while the store is failing)."""
        return LivenessTable({k: v for k, v in self.loops.items() if k in names})

    def tick_ages(self, now: float) -> dict[str, float]:
        """Seconds since each loop's last tick, for ``/ready`` and ``loop_tick_age_seconds``."""
        return {name: max(0.0, now - t.last_tick) for name, t in sorted(self.loops.items())}

    def stale(self, now: float, grace_factor: float, stale_floor: float) -> list[tuple[str, float]]:
        """``(name, age)`` of every loop whose age exceeds its allowance, by name."""
        return [
            (name, age)
            for name, age in self.tick_ages(now).items()
            if age > self.loops[name].allowance(grace_factor, stale_floor)
        ]


def judge_stale_loops(table: LivenessTable, now: float, settings: WatchdogSettings) -> Idle | Trip:
    """Trip when any watched loop is stale (see :meth:`LivenessTable.stale`)."""
    stale = table.stale(now, settings.tick_grace_factor, settings.stale_floor)
    if not stale:
        return Idle()
    listed = ", ".join(f"{name} ({age:.1f}s)" for name, age in stale)
    return Trip(Detector.STALE_LOOP, f"loops stopped ticking: {listed}")


# -- c. sibling contract ---------------------------------------------------------------


class SiblingExit(StrEnum):
    CLEAN = "clean"  # returned while shutting down: the contract
    CONTRACT_VIOLATION = "contract_violation"  # returned with no shutdown in progress
    CRASH = "crash"  # raised


@dataclass(frozen=True, slots=True)
class RaiseSiblingReturned:
    """Raise :meth:`error` from the sibling spawner so the TaskGroup unwinds."""

    sibling: str

    def error(self) -> RuntimeError:
        return RuntimeError(
            f"worker sibling {self.sibling!r} returned while no shutdown was in progress"
        )


@dataclass(frozen=True, slots=True)
class CountSiblingCrash:
    """Increment ``taskq.worker.sibling_crashes_total{loop}``."""

    loop: str


SiblingAction: TypeAlias = SetShutdownEvent | RaiseSiblingReturned | CountSiblingCrash


@dataclass(frozen=True, slots=True)
class SiblingVerdict:
    """How a long-lived sibling ended and what the spawner must do about it."""

    sibling: str
    outcome: SiblingExit
    actions: tuple[SiblingAction, ...] = ()

    @property
    def detector(self) -> Detector | None:
        """``sibling_contract`` for a violation (the log/metric label), else None."""
        if self.outcome is SiblingExit.CONTRACT_VIOLATION:
            return Detector.SIBLING_CONTRACT
        return None


def judge_sibling_exit(name: str, *, raised: bool, shutdown_in_progress: bool) -> SiblingVerdict:
    """Judge a sibling that ended. Armed even when the watchdog is disabled.

    ``raised`` means it ended with an exception other than its own
    cancellation (the runtime never reports ``CancelledError`` as a crash).
    A crash counts whether or not a shutdown is in progress.
    """
    if raised:
        return SiblingVerdict(
            name, SiblingExit.CRASH, (SetShutdownEvent(), CountSiblingCrash(name))
        )
    if shutdown_in_progress:
        return SiblingVerdict(name, SiblingExit.CLEAN)
    return SiblingVerdict(
        name, SiblingExit.CONTRACT_VIOLATION, (SetShutdownEvent(), RaiseSiblingReturned(name))
    )


# -- d. event-loop lag -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopLagDetector:
    """Beats scheduled onto the event loop, as seen by the watchdog thread.

    ``started_at`` is when the detector was created. It arms at
    ``started_at + startup_grace`` or at the first liveness tick, whichever
    comes first (``armed_at``); ``last_beat`` is when the loop last ran a
    beat. Lag is measured from the later of ``last_beat`` and ``armed_at``, so
    time spent blocked before arming (bootstrap) never counts against
    ``budget``. Owned by the watchdog thread; the loop's beats reach it through
    whatever hand-off the runtime uses (each method returns a new detector).
    """

    started_at: float
    budget: float = 10.0
    startup_grace: float = 30.0
    armed_at: float | None = None
    last_beat: float | None = None

    def __post_init__(self) -> None:
        for name, value in (("budget", self.budget), ("startup_grace", self.startup_grace)):
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"loop lag {name} must be > 0, got {value!r}")
        if self.armed_at is not None and not (
            self.started_at <= self.armed_at <= self.grace_ends_at
        ):
            raise ValueError(f"{self!r}: armed outside [started_at, started_at + startup_grace]")

    @classmethod
    def from_settings(cls, settings: WatchdogSettings, *, started_at: float) -> LoopLagDetector:
        return cls(
            started_at=started_at,
            budget=settings.loop_lag_budget,
            startup_grace=settings.loop_lag_startup_grace,
        )

    @property
    def grace_ends_at(self) -> float:
        return self.started_at + self.startup_grace

    def beat(self, now: float) -> LoopLagDetector:
        """The event loop ran a beat at ``now``."""
        if self.last_beat is not None and now <= self.last_beat:
            return self
        return replace(self, last_beat=now)

    def on_liveness_tick(self, now: float) -> LoopLagDetector:
        """A loop ticked its liveness: the loop is up, so arm if not yet armed."""
        if self.armed_at is not None:
            return self
        return replace(self, armed_at=min(max(now, self.started_at), self.grace_ends_at))

    def check(self, now: float) -> tuple[LoopLagDetector, Idle | Trip]:
        """Arm once the startup grace is over; trip when armed and the lag exceeds budget."""
        state, armed_at = self, self.armed_at
        if armed_at is None:
            if now < self.grace_ends_at:
                return self, Idle()
            armed_at = self.grace_ends_at
            state = replace(self, armed_at=armed_at)
        since = armed_at if state.last_beat is None else max(state.last_beat, armed_at)
        lag = now - since
        if lag > self.budget:
            return state, Trip(
                Detector.LOOP_LAG,
                f"event loop ran no beat for {lag:.1f}s (budget {self.budget:g}s)",
            )
        return state, Idle()


__all__ = [
    "SIBLING_CRASHES_METRIC",
    "TRIPS_METRIC",
    "TRIP_EVENT",
    "TRIP_EXIT_CODE",
    "CountSiblingCrash",
    "Detector",
    "Idle",
    "LivenessTable",
    "LoopLagDetector",
    "LoopTick",
    "RaiseSiblingReturned",
    "SiblingAction",
    "SiblingExit",
    "SiblingVerdict",
    "StillAlive",
    "Trip",
    "WatchdogSettings",
    "judge_shutdown_deadline",
    "judge_sibling_exit",
    "judge_stale_loops",
]
