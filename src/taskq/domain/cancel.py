"""Cancel controller: which cancel action each heartbeat tick owes a running job.

Every heartbeat tick the runtime reads each owned job's persisted
``cancel_phase`` from the store and feeds it here together with whether the
job still runs locally and ``now`` (seconds on the monotonic clock). The
local phase of a job only moves forward::

           persisted ≥ 1              cancellation grace           cleanup grace
    NONE ───────────────▶ COOPERATIVE ────────────────▶ FORCED ─────────────▶ ABANDON_PENDING
         SetCancelEvent                 PersistForced*             QueueAbandon
                                        CancelTask
                                      (or persisted ≥ 2)        (or persisted ≥ 3)

    any phase ── job no longer runs locally ──▶ Forget, then no further actions

    * PersistForced is owed only while the store still says < FORCED.

A persisted phase ahead of the local one (the shutdown orchestrator writes
FORCED for every in-flight job) fast-forwards the job in one tick, emitting
every action still owed on the way, in order: a job seen at NONE whose row
already says FORCED gets ``SetCancelEvent`` then ``CancelTask``. Each action is
emitted at most once per job.

Grace periods count from the moment this controller *observed* the previous
phase, so a delayed heartbeat never shortens the actor's cooperative window.
A grace has elapsed once ``now - since >= grace``.

``QueueAbandon`` is carried out by ``run_post_tx`` after the heartbeat
transaction commits (the abandon write would otherwise deadlock on the row
locks the transaction holds); from then on the consumer must not write
``cancelled`` itself, see :func:`consumer_skips_mark_cancelled`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TypeAlias

from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class GracePeriods:
    """The two cancel graces in seconds, shared by the cancel controller and shutdown.

    Raises :class:`ConfigurationError` unless both are finite and ``>= 0``.
    """

    cancellation_grace_period: float = 30.0
    cleanup_grace_period: float = 10.0

    def __post_init__(self) -> None:
        for env, value in (
            ("TASKQ_CANCELLATION_GRACE_PERIOD", self.cancellation_grace_period),
            ("TASKQ_CLEANUP_GRACE_PERIOD", self.cleanup_grace_period),
        ):
            if not math.isfinite(value) or value < 0:
                raise ConfigurationError(f"{env} must be a finite number >= 0, got {value!r}")


# -- actions the runtime carries out ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetCancelEvent:
    """Set the job's ``ctx.cancel_event`` so the actor can return cooperatively."""


@dataclass(frozen=True, slots=True)
class PersistForced:
    """Write ``cancel_phase=2`` (FORCED) for the job inside the heartbeat transaction."""


@dataclass(frozen=True, slots=True)
class CancelTask:
    """Call ``task.cancel()`` on the job's asyncio task (after any PersistForced)."""


@dataclass(frozen=True, slots=True)
class QueueAbandon:
    """Hand the job to ``run_post_tx``, which marks it abandoned after the commit."""


@dataclass(frozen=True, slots=True)
class Forget:
    """The job no longer runs locally: drop its bookkeeping; nothing further follows."""


CancelAction: TypeAlias = SetCancelEvent | PersistForced | CancelTask | QueueAbandon | Forget


# -- one job ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Observed:
    """One heartbeat's view of a job: its persisted phase and whether it runs locally."""

    persisted: CancelPhase
    running: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class JobCancelState:
    """The local cancel phase of one job and when each phase was entered.

    Invariants (checked on construction): a timestamp is set exactly when its
    phase has been reached, and the timestamps are in phase order.
    """

    phase: CancelPhase = CancelPhase.NONE
    cooperative_at: float | None = None
    forced_at: float | None = None
    abandon_queued_at: float | None = None
    forgotten: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.phase, CancelPhase):
            raise TypeError(f"phase must be a CancelPhase, got {self.phase!r}")
        stamps = (self.cooperative_at, self.forced_at, self.abandon_queued_at)
        for reached, stamp in zip(
            (CancelPhase.COOPERATIVE, CancelPhase.FORCED, CancelPhase.ABANDON_PENDING),
            stamps,
            strict=True,
        ):
            if (self.phase >= reached) != (stamp is not None):
                raise ValueError(f"{self!r}: {reached.name} timestamp does not match phase")
        known = [s for s in stamps if s is not None]
        if known != sorted(known):
            raise ValueError(f"{self!r}: phase timestamps are out of order")

    @property
    def last_change_at(self) -> float | None:
        """When the phase last moved (None while NONE)."""
        for stamp in (self.abandon_queued_at, self.forced_at, self.cooperative_at):
            if stamp is not None:
                return stamp
        return None


def step(
    state: JobCancelState, event: Observed, now: float, *, graces: GracePeriods
) -> tuple[JobCancelState, tuple[CancelAction, ...]]:
    """Advance one job by one heartbeat tick; returns the new state and the owed actions.

    Raises ``ValueError`` if ``now`` is earlier than the last phase change
    (the caller mixed clocks).
    """
    if state.forgotten:
        return state, ()
    if not event.running:
        return replace(state, forgotten=True), (Forget(),)
    last = state.last_change_at
    if last is not None and now < last:
        raise ValueError(f"time went backwards: now={now} < last phase change {last}")

    persisted = event.persisted
    actions: list[CancelAction] = []
    phase, cooperative_at, forced_at, abandon_at = (
        state.phase,
        state.cooperative_at,
        state.forced_at,
        state.abandon_queued_at,
    )
    # Sequential checks, not elif: a persisted phase ahead of ours walks through
    # every intermediate phase in one tick so no owed action is skipped.
    if phase is CancelPhase.NONE and persisted >= CancelPhase.COOPERATIVE:
        phase, cooperative_at = CancelPhase.COOPERATIVE, now
        actions.append(SetCancelEvent())
    if phase is CancelPhase.COOPERATIVE and (
        persisted >= CancelPhase.FORCED
        or now - _req(cooperative_at) >= graces.cancellation_grace_period
    ):
        phase, forced_at = CancelPhase.FORCED, now
        if persisted < CancelPhase.FORCED:
            actions.append(PersistForced())
        actions.append(CancelTask())
    if phase is CancelPhase.FORCED and (
        persisted >= CancelPhase.ABANDON_PENDING
        or now - _req(forced_at) >= graces.cleanup_grace_period
    ):
        phase, abandon_at = CancelPhase.ABANDON_PENDING, now
        actions.append(QueueAbandon())
    if not actions:
        return state, ()
    new = JobCancelState(
        phase=phase,
        cooperative_at=cooperative_at,
        forced_at=forced_at,
        abandon_queued_at=abandon_at,
    )
    return new, tuple(actions)


def _req(value: float | None) -> float:
    # The state invariants guarantee the timestamp of a reached phase is set.
    assert value is not None
    return value


def consumer_skips_mark_cancelled(phase: CancelPhase) -> bool:
    """Whether the consumer must leave the terminal write to ``run_post_tx``.

    True from ABANDON_PENDING on: the abandonment is already queued, and a
    ``cancelled`` write racing it would give the job two terminal outcomes.
    """
    return phase >= CancelPhase.ABANDON_PENDING


# -- all jobs of one worker ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CancelController:
    """Per-job cancel states of one worker, advanced together on each heartbeat.

    Owned by the heartbeat loop, which replaces its reference with the
    controller each :meth:`tick` returns.
    """

    graces: GracePeriods = field(default_factory=GracePeriods)
    jobs: Mapping[int, JobCancelState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Freeze a private copy so no caller can mutate a controller after the fact.
        object.__setattr__(self, "jobs", MappingProxyType(dict(self.jobs)))

    def __repr__(self) -> str:
        return f"CancelController(graces={self.graces!r}, jobs={dict(self.jobs)!r})"

    def phase_of(self, job_id: int) -> CancelPhase:
        """The local phase of a job (NONE for a job this controller does not track)."""
        state = self.jobs.get(job_id)
        return CancelPhase.NONE if state is None else state.phase

    def tick(
        self,
        observed: Mapping[int, CancelPhase],
        now: float,
        *,
        running: Set[int] | None = None,
    ) -> tuple[CancelController, list[tuple[int, CancelAction]]]:
        """Advance every job by one heartbeat; returns the new controller and owed actions.

        ``observed`` maps each job the heartbeat reported as owned by this
        worker to its persisted phase. ``running`` is the set of jobs with a
        local task (``None``: every observed job has one). An observed job
        without a local task is not tracked (nothing can be cancelled yet); a
        tracked job that stops running locally, or that the store no longer
        reports as ours, gets one ``Forget`` and is dropped. Actions are listed
        per job in the order they must be carried out.
        """
        jobs: dict[int, JobCancelState] = {}
        out: list[tuple[int, CancelAction]] = []
        for job_id, persisted in observed.items():
            is_running = running is None or job_id in running
            state = self.jobs.get(job_id)
            if state is None:
                if not is_running:
                    continue
                state = JobCancelState()
            new, actions = step(state, Observed(persisted, is_running), now, graces=self.graces)
            out.extend((job_id, a) for a in actions)
            if not new.forgotten:
                jobs[job_id] = new
        for job_id in sorted(self.jobs.keys() - observed.keys()):
            out.append((job_id, Forget()))
        return CancelController(self.graces, jobs), out

    def forget(self, job_id: int) -> CancelController:
        """Drop a job whose attempt ended locally (the consumer deregistered it)."""
        if job_id not in self.jobs:
            return self
        return CancelController(self.graces, {k: v for k, v in self.jobs.items() if k != job_id})


__all__ = [
    "CancelAction",
    "CancelController",
    "CancelTask",
    "Forget",
    "GracePeriods",
    "JobCancelState",
    "Observed",
    "PersistForced",
    "QueueAbandon",
    "SetCancelEvent",
    "consumer_skips_mark_cancelled",
    "step",
]
