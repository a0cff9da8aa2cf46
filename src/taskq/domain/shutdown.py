"""Graceful shutdown: the phase machine behind ``orchestrate_shutdown``.

Time is seconds on the monotonic clock. ``phase.value`` is the
``shutdown_phase`` the worker guide publishes on ``/metrics`` (NONE 0 …
ABANDONING 4; DONE is 5, seen only while the process exits)::

          Signal #1                DrainComplete(n > 0)          cancellation grace
    NONE ──────────▶ DRAINING ─────────────────────▶ CANCELLING ───────────────────▶ FORCING
      StopProducer       │       SetCancelEventOnInFlight  │   or Signal #2          │
      DrainLocalQueue-   │                                 │   PersistForcedAnd-     │
      ToPending          │ DrainComplete(0)                │   CancelTasks           │ cleanup grace
                         │                 JobsInFlight(0) │       JobsInFlight(0)   ▼
                         └──────────────────────────────▶ DONE ◀──────────────── ABANDONING
                           ReleaseLeader + SetShutdownEvent      AbandonComplete   MarkAbandoned-
                                                                 SetShutdownEvent  StillRunning
                                                                                   ReleaseLeader

    Signal #3 in any phase before DONE: HardExit(1), after which the machine is
    frozen (the process is exiting). DONE absorbs every event.

Decisions the worker guide leaves open:

- A second signal during DRAINING does not interrupt the drain (skipping it
  would leave claimed-but-unstarted rows locked until their lease expires).
  It is remembered: when the drain completes, the machine passes through
  CANCELLING straight to FORCING, still emitting ``SetCancelEventOnInFlight``
  first so no action is skipped.
- A second signal in FORCING or ABANDONING only counts towards the third.
- ``JobsInFlight(0)`` ends the shutdown at once in CANCELLING and FORCING. In
  ABANDONING it does not: the abandonment writes are the runtime's work in
  progress, and setting ``shutdown_event`` before they land would let the
  siblings return under them. ``AbandonComplete`` ends that phase.
- A grace has elapsed once ``now - phase_started_at >= grace``; timers are
  checked after every event, so a late tick escalates as many phases as the
  elapsed time allows. Each phase's grace counts from when it was entered.
- Stray events (a drain completion outside DRAINING, an abandon completion
  outside ABANDONING) are ignored: the runtime may race them with a signal.

Each action is emitted at most once per process.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Final, TypeAlias

from taskq.domain.cancel import GracePeriods

#: The signal count that ends the process without further shutdown work.
HARD_EXIT_SIGNAL_COUNT: Final = 3
#: The exit code of that hard exit.
HARD_EXIT_CODE: Final = 1


class ShutdownPhase(IntEnum):
    NONE = 0
    DRAINING = 1
    CANCELLING = 2
    FORCING = 3
    ABANDONING = 4
    DONE = 5


# -- events ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Signal:
    """SIGTERM or SIGINT arrived (``name`` is for logs only)."""

    name: str = "SIGTERM"


@dataclass(frozen=True, slots=True)
class DrainComplete:
    """``drain_local_queue_to_pending`` finished; ``in_flight`` jobs are still executing."""

    in_flight: int

    def __post_init__(self) -> None:
        if self.in_flight < 0:
            raise ValueError(f"in_flight must be >= 0, got {self.in_flight}")


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed; lets the grace timers fire."""


@dataclass(frozen=True, slots=True)
class JobsInFlight:
    """The number of jobs still executing changed to ``count``."""

    count: int

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"count must be >= 0, got {self.count}")


@dataclass(frozen=True, slots=True)
class AbandonComplete:
    """The ABANDONING phase's ``mark_abandoned`` writes have finished."""


ShutdownEvent: TypeAlias = Signal | DrainComplete | Tick | JobsInFlight | AbandonComplete


# -- actions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StopProducer:
    """Set ``producer_stop_event``: claim nothing more."""


@dataclass(frozen=True, slots=True)
class DrainLocalQueueToPending:
    """Re-pend rows claimed by this worker but not started; report ``DrainComplete``."""


@dataclass(frozen=True, slots=True)
class SetCancelEventOnInFlight:
    """Set ``cancel_event`` on every in-flight job (cooperative cancel)."""


@dataclass(frozen=True, slots=True)
class PersistForcedAndCancelTasks:
    """Write ``cancel_phase=2`` for the remaining jobs, then ``task.cancel()`` each."""


@dataclass(frozen=True, slots=True)
class MarkAbandonedStillRunning:
    """``mark_abandoned`` every job still running; report ``AbandonComplete``."""


@dataclass(frozen=True, slots=True)
class ReleaseLeader:
    """Close ``leader_conn``, releasing the maintenance advisory lock."""


@dataclass(frozen=True, slots=True)
class SetShutdownEvent:
    """Set ``shutdown_event`` so every TaskGroup sibling returns."""


@dataclass(frozen=True, slots=True)
class HardExit:
    """Leave at once with ``exit_code`` (the third signal)."""

    exit_code: int = HARD_EXIT_CODE


ShutdownAction: TypeAlias = (
    StopProducer
    | DrainLocalQueueToPending
    | SetCancelEventOnInFlight
    | PersistForcedAndCancelTasks
    | MarkAbandonedStillRunning
    | ReleaseLeader
    | SetShutdownEvent
    | HardExit
)


# -- state -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ShutdownState:
    """Where the shutdown is, how many signals arrived, and when it and its phase began.

    ``shutdown_started_at`` is the first signal's time: the watchdog's
    termination deadline and ``/ready``'s ``shutdown_elapsed_seconds`` are
    anchored on it. Invariants are checked on construction.
    """

    graces: GracePeriods = field(default_factory=GracePeriods, repr=False)
    phase: ShutdownPhase = ShutdownPhase.NONE
    signals: int = 0
    shutdown_started_at: float | None = None
    phase_started_at: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.phase, ShutdownPhase):
            raise TypeError(f"phase must be a ShutdownPhase, got {self.phase!r}")
        if self.phase is ShutdownPhase.NONE:
            if self.signals or self.shutdown_started_at is not None:
                raise ValueError(f"{self!r}: NONE has no signals and no start time")
            if self.phase_started_at is not None:
                raise ValueError(f"{self!r}: NONE has no phase start time")
            return
        if self.signals < 1 or self.shutdown_started_at is None or self.phase_started_at is None:
            raise ValueError(f"{self!r}: a started shutdown needs a signal and start times")
        if self.phase_started_at < self.shutdown_started_at:
            raise ValueError(f"{self!r}: phase started before the shutdown")
        # A second signal in CANCELLING always moves on to FORCING.
        if self.phase is ShutdownPhase.CANCELLING and self.signals != 1:
            raise ValueError(f"{self!r}: CANCELLING after a second signal")

    @property
    def hard_exited(self) -> bool:
        """True once the third signal asked for a hard exit; nothing happens after it."""
        return self.signals >= HARD_EXIT_SIGNAL_COUNT

    def elapsed(self, now: float) -> float | None:
        """Seconds since the first signal (``None`` before it), for ``/ready``."""
        if self.shutdown_started_at is None:
            return None
        return max(0.0, now - self.shutdown_started_at)


def transition(
    state: ShutdownState, event: ShutdownEvent, now: float
) -> tuple[ShutdownState, tuple[ShutdownAction, ...]]:
    """Apply one event at ``now``; returns the new state and the actions to carry out.

    Raises ``ValueError`` if ``now`` is before the current phase began.
    """
    if state.phase is ShutdownPhase.DONE or state.hard_exited:
        return state, ()
    if state.phase_started_at is not None and now < state.phase_started_at:
        raise ValueError(f"time went backwards: now={now} < {state.phase_started_at}")
    if isinstance(event, Signal):
        return _on_signal(state, now)
    if state.phase is ShutdownPhase.NONE:
        return state, ()

    actions: list[ShutdownAction] = []
    if isinstance(event, DrainComplete) and state.phase is ShutdownPhase.DRAINING:
        if event.in_flight == 0:
            return _done(state, now, (ReleaseLeader(), SetShutdownEvent()))
        actions.append(SetCancelEventOnInFlight())
        if state.signals >= 2:
            # Pass through CANCELLING without stopping: a second signal already came.
            state = _enter(state, ShutdownPhase.FORCING, now)
            actions.append(PersistForcedAndCancelTasks())
        else:
            state = _enter(state, ShutdownPhase.CANCELLING, now)
    elif (
        isinstance(event, JobsInFlight)
        and event.count == 0
        and state.phase in (ShutdownPhase.CANCELLING, ShutdownPhase.FORCING)
    ):
        return _done(state, now, (ReleaseLeader(), SetShutdownEvent()))
    elif isinstance(event, AbandonComplete) and state.phase is ShutdownPhase.ABANDONING:
        return _done(state, now, (SetShutdownEvent(),))
    return _run_timers(state, now, actions)


def _on_signal(
    state: ShutdownState, now: float
) -> tuple[ShutdownState, tuple[ShutdownAction, ...]]:
    if state.phase is ShutdownPhase.NONE:
        started = replace(
            state,
            phase=ShutdownPhase.DRAINING,
            signals=1,
            shutdown_started_at=now,
            phase_started_at=now,
        )
        return started, (StopProducer(), DrainLocalQueueToPending())
    count = state.signals + 1
    if count == HARD_EXIT_SIGNAL_COUNT:
        return replace(state, signals=count), (HardExit(),)
    if count == 2 and state.phase is ShutdownPhase.CANCELLING:
        forcing = replace(state, phase=ShutdownPhase.FORCING, signals=count, phase_started_at=now)
        return _run_timers(forcing, now, [PersistForcedAndCancelTasks()])
    # DRAINING remembers the count (see module docstring); later phases only count.
    return _run_timers(replace(state, signals=count), now, [])


def _run_timers(
    state: ShutdownState, now: float, actions: list[ShutdownAction]
) -> tuple[ShutdownState, tuple[ShutdownAction, ...]]:
    graces = state.graces
    while True:
        since = now - _req(state.phase_started_at)
        if state.phase is ShutdownPhase.CANCELLING and since >= graces.cancellation_grace_period:
            state = _enter(state, ShutdownPhase.FORCING, now)
            actions.append(PersistForcedAndCancelTasks())
        elif state.phase is ShutdownPhase.FORCING and since >= graces.cleanup_grace_period:
            state = _enter(state, ShutdownPhase.ABANDONING, now)
            actions += (MarkAbandonedStillRunning(), ReleaseLeader())
        else:
            return state, tuple(actions)


def _enter(state: ShutdownState, phase: ShutdownPhase, now: float) -> ShutdownState:
    return replace(state, phase=phase, phase_started_at=now)


def _done(
    state: ShutdownState, now: float, actions: tuple[ShutdownAction, ...]
) -> tuple[ShutdownState, tuple[ShutdownAction, ...]]:
    return _enter(state, ShutdownPhase.DONE, now), actions


def _req(value: float | None) -> float:
    # Every phase after NONE has a start time (state invariant).
    assert value is not None
    return value


__all__ = [
    "HARD_EXIT_CODE",
    "HARD_EXIT_SIGNAL_COUNT",
    "AbandonComplete",
    "DrainComplete",
    "DrainLocalQueueToPending",
    "HardExit",
    "JobsInFlight",
    "MarkAbandonedStillRunning",
    "PersistForcedAndCancelTasks",
    "ReleaseLeader",
    "SetCancelEventOnInFlight",
    "SetShutdownEvent",
    "ShutdownAction",
    "ShutdownEvent",
    "ShutdownPhase",
    "ShutdownState",
    "Signal",
    "StopProducer",
    "Tick",
    "transition",
]
