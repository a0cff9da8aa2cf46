"""Unit tests for the per-job cancel controller (taskq.domain.cancel)."""

from __future__ import annotations

import math

import pytest

from taskq.domain.cancel import (
    CancelController,
    CancelTask,
    Forget,
    GracePeriods,
    JobCancelState,
    Observed,
    PersistForced,
    QueueAbandon,
    SetCancelEvent,
    consumer_skips_mark_cancelled,
    step,
)
from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import ConfigurationError

G = GracePeriods(cancellation_grace_period=30.0, cleanup_grace_period=10.0)
P = CancelPhase


def cooperative_at(t: float) -> JobCancelState:
    return JobCancelState(phase=P.COOPERATIVE, cooperative_at=t)


def forced_at(coop: float, forced: float) -> JobCancelState:
    return JobCancelState(phase=P.FORCED, cooperative_at=coop, forced_at=forced)


# -- GracePeriods ----------------------------------------------------------------------


def test_grace_defaults_match_the_settings_reference() -> None:
    """Default graces are the worker guide's 30s cooperative and 10s cleanup."""
    assert GracePeriods() == GracePeriods(30.0, 10.0)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_grace_periods_reject_unusable_values(bad: float) -> None:
    """A negative, NaN or infinite grace is a configuration error naming its variable."""
    with pytest.raises(ConfigurationError, match="TASKQ_CANCELLATION_GRACE_PERIOD"):
        GracePeriods(cancellation_grace_period=bad)
    with pytest.raises(ConfigurationError, match="TASKQ_CLEANUP_GRACE_PERIOD"):
        GracePeriods(cleanup_grace_period=bad)


def test_zero_graces_are_allowed() -> None:
    """Zero graces are accepted (escalate on the next tick)."""
    assert GracePeriods(0.0, 0.0).cleanup_grace_period == 0.0


# -- JobCancelState invariants ---------------------------------------------------------


def test_state_rejects_phase_without_its_timestamp() -> None:
    """A phase that has been reached must carry the time it was reached."""
    with pytest.raises(ValueError, match="COOPERATIVE"):
        JobCancelState(phase=P.COOPERATIVE)


def test_state_rejects_timestamp_of_unreached_phase() -> None:
    """A timestamp for a phase not yet reached is an illegal state."""
    with pytest.raises(ValueError, match="FORCED"):
        JobCancelState(phase=P.COOPERATIVE, cooperative_at=1.0, forced_at=2.0)


def test_state_rejects_out_of_order_timestamps() -> None:
    """Phase timestamps must follow phase order."""
    with pytest.raises(ValueError, match="out of order"):
        JobCancelState(phase=P.FORCED, cooperative_at=5.0, forced_at=4.0)


def test_state_rejects_plain_int_phase() -> None:
    """The phase must be a CancelPhase, not a bare int."""
    with pytest.raises(TypeError):
        JobCancelState(phase=1, cooperative_at=0.0)  # type: ignore[arg-type]


def test_state_repr_shows_phase_and_times() -> None:
    """The repr names the phase and its timestamps (useful in logs)."""
    text = repr(forced_at(1.0, 31.0))
    assert "FORCED" in text
    assert "forced_at=31.0" in text


def test_last_change_handles_time_zero() -> None:
    """A phase entered at monotonic time 0.0 still counts as a recorded change."""
    assert cooperative_at(0.0).last_change_at == 0.0
    assert JobCancelState().last_change_at is None


# -- step: time-driven escalation ------------------------------------------------------


def test_no_cancel_requested_means_no_actions() -> None:
    """A job whose row says NONE stays NONE and owes nothing."""
    state, actions = step(JobCancelState(), Observed(P.NONE), 100.0, graces=G)
    assert (state, actions) == (JobCancelState(), ())


def test_cancel_request_sets_cancel_event_and_records_time() -> None:
    """Seeing COOPERATIVE sets the cancel event once and records when."""
    state, actions = step(JobCancelState(), Observed(P.COOPERATIVE), 7.0, graces=G)
    assert actions == (SetCancelEvent(),)
    assert state == cooperative_at(7.0)


def test_cooperative_waits_for_the_cancellation_grace() -> None:
    """Before the cancellation grace has elapsed nothing escalates."""
    state, actions = step(cooperative_at(7.0), Observed(P.COOPERATIVE), 36.9, graces=G)
    assert (state, actions) == (cooperative_at(7.0), ())


def test_cancellation_grace_elapsed_persists_forced_then_cancels_task() -> None:
    """At cooperative + grace the job is forced: persist phase 2 first, then cancel the task."""
    state, actions = step(cooperative_at(7.0), Observed(P.COOPERATIVE), 37.0, graces=G)
    assert actions == (PersistForced(), CancelTask())
    assert state == forced_at(7.0, 37.0)


def test_forced_waits_for_the_cleanup_grace() -> None:
    """Before the cleanup grace has elapsed a forced job is not abandoned."""
    state, actions = step(forced_at(0.0, 30.0), Observed(P.FORCED), 39.9, graces=G)
    assert (state, actions) == (forced_at(0.0, 30.0), ())


def test_cleanup_grace_elapsed_queues_abandonment() -> None:
    """At forced + cleanup grace the job is queued for abandonment."""
    state, actions = step(forced_at(0.0, 30.0), Observed(P.FORCED), 40.0, graces=G)
    assert actions == (QueueAbandon(),)
    assert state.phase is P.ABANDON_PENDING
    assert state.abandon_queued_at == 40.0


def test_abandon_pending_is_final() -> None:
    """Once abandonment is queued, later ticks owe nothing."""
    start, _ = step(forced_at(0.0, 30.0), Observed(P.FORCED), 40.0, graces=G)
    state, actions = step(start, Observed(P.ABANDON_PENDING), 1000.0, graces=G)
    assert (state, actions) == (start, ())


def test_grace_counts_from_local_observation_not_request_time() -> None:
    """A late heartbeat does not shorten the cooperative window: the grace starts when seen."""
    state, _ = step(JobCancelState(), Observed(P.COOPERATIVE), 500.0, graces=G)
    _, actions = step(state, Observed(P.COOPERATIVE), 529.0, graces=G)
    assert actions == ()


def test_a_late_tick_does_not_skip_the_cleanup_window() -> None:
    """A tick long after the cancellation grace forces, but abandons only a cleanup grace later."""
    state, actions = step(cooperative_at(0.0), Observed(P.COOPERATIVE), 500.0, graces=G)
    assert actions == (PersistForced(), CancelTask())
    _, actions = step(state, Observed(P.FORCED), 509.0, graces=G)
    assert actions == ()


def test_zero_graces_chain_through_all_phases_in_one_tick() -> None:
    """With both graces zero a cancel request reaches ABANDON_PENDING in one tick, in order."""
    zero = GracePeriods(0.0, 0.0)
    state, actions = step(JobCancelState(), Observed(P.COOPERATIVE), 3.0, graces=zero)
    assert actions == (SetCancelEvent(), PersistForced(), CancelTask(), QueueAbandon())
    assert state.phase is P.ABANDON_PENDING


# -- step: persisted phase ahead (fast-forward) ----------------------------------------


def test_persisted_forced_from_none_sets_event_and_cancels_without_persisting() -> None:
    """Seeing FORCED from NONE owes the cancel event and the task cancel, but no write."""
    state, actions = step(JobCancelState(), Observed(P.FORCED), 5.0, graces=G)
    assert actions == (SetCancelEvent(), CancelTask())
    assert state == forced_at(5.0, 5.0)


def test_persisted_forced_during_cooperative_only_cancels_task() -> None:
    """The store moving to FORCED early (shutdown) cancels the task before the grace."""
    state, actions = step(cooperative_at(0.0), Observed(P.FORCED), 1.0, graces=G)
    assert actions == (CancelTask(),)
    assert state == forced_at(0.0, 1.0)


def test_persisted_abandon_pending_from_none_owes_every_action() -> None:
    """Seeing ABANDON_PENDING from NONE emits event, cancel and abandonment, in order."""
    state, actions = step(JobCancelState(), Observed(P.ABANDON_PENDING), 2.0, graces=G)
    assert actions == (SetCancelEvent(), CancelTask(), QueueAbandon())
    assert state.phase is P.ABANDON_PENDING


def test_cleanup_grace_counts_from_when_forced_was_seen() -> None:
    """After a persisted fast-forward to FORCED, abandonment still waits a full cleanup grace."""
    state, _ = step(JobCancelState(), Observed(P.FORCED), 5.0, graces=G)
    _, early = step(state, Observed(P.FORCED), 14.0, graces=G)
    _, due = step(state, Observed(P.FORCED), 15.0, graces=G)
    assert (early, due) == ((), (QueueAbandon(),))


def test_persisted_phase_behind_local_never_moves_it_back() -> None:
    """A store phase lower than the local one neither regresses it nor re-emits actions."""
    state, actions = step(forced_at(0.0, 30.0), Observed(P.NONE), 31.0, graces=G)
    assert (state, actions) == (forced_at(0.0, 30.0), ())


# -- step: local end of the job --------------------------------------------------------


def test_job_finished_locally_is_forgotten_once() -> None:
    """A job no longer running locally gets exactly one Forget."""
    state, actions = step(
        cooperative_at(0.0), Observed(P.COOPERATIVE, running=False), 1.0, graces=G
    )
    assert actions == (Forget(),)
    assert state.forgotten
    again, more = step(state, Observed(P.COOPERATIVE, running=False), 2.0, graces=G)
    assert (again, more) == (state, ())


def test_forgotten_job_gets_no_further_actions() -> None:
    """Even if the store later escalates, a forgotten job owes nothing."""
    state, _ = step(JobCancelState(), Observed(P.NONE, running=False), 1.0, graces=G)
    _, actions = step(state, Observed(P.ABANDON_PENDING), 100.0, graces=G)
    assert actions == ()


def test_time_going_backwards_is_rejected() -> None:
    """A `now` earlier than the last phase change means mixed clocks and raises."""
    with pytest.raises(ValueError, match="backwards"):
        step(cooperative_at(10.0), Observed(P.COOPERATIVE), 9.0, graces=G)


@pytest.mark.parametrize(
    ("phase", "skips"),
    [(P.NONE, False), (P.COOPERATIVE, False), (P.FORCED, False), (P.ABANDON_PENDING, True)],
)
def test_consumer_skips_mark_cancelled_from_abandon_pending(
    phase: CancelPhase, skips: bool
) -> None:
    """The consumer leaves the terminal write to run_post_tx exactly from ABANDON_PENDING on."""
    assert consumer_skips_mark_cancelled(phase) is skips


# -- CancelController ------------------------------------------------------------------


def test_controller_tracks_new_running_jobs_and_emits_per_job_actions() -> None:
    """Each observed running job is tracked and its owed actions are tagged with its id."""
    ctl, actions = CancelController(G).tick({1: P.NONE, 2: P.COOPERATIVE}, 0.0)
    assert actions == [(2, SetCancelEvent())]
    assert ctl.phase_of(1) is P.NONE
    assert ctl.phase_of(2) is P.COOPERATIVE


def test_controller_escalates_on_later_ticks() -> None:
    """The controller carries per-job timing across ticks."""
    ctl, _ = CancelController(G).tick({2: P.COOPERATIVE}, 0.0)
    ctl, actions = ctl.tick({2: P.COOPERATIVE}, 30.0)
    assert actions == [(2, PersistForced()), (2, CancelTask())]
    ctl, actions = ctl.tick({2: P.FORCED}, 40.0)
    assert actions == [(2, QueueAbandon())]
    assert ctl.phase_of(2) is P.ABANDON_PENDING


def test_controller_forgets_job_missing_from_heartbeat() -> None:
    """A tracked job the store no longer reports as ours gets one Forget and is dropped."""
    ctl, _ = CancelController(G).tick({1: P.COOPERATIVE}, 0.0)
    ctl, actions = ctl.tick({}, 1.0)
    assert actions == [(1, Forget())]
    assert 1 not in ctl.jobs
    _, actions = ctl.tick({}, 2.0)
    assert actions == []


def test_controller_forgets_job_that_stopped_running_locally() -> None:
    """A tracked job missing from the running set gets one Forget and is dropped."""
    ctl, _ = CancelController(G).tick({1: P.COOPERATIVE}, 0.0)
    ctl, actions = ctl.tick({1: P.FORCED}, 1.0, running=set())
    assert actions == [(1, Forget())]
    assert 1 not in ctl.jobs


def test_controller_ignores_observed_jobs_without_a_local_task() -> None:
    """A reported job with no local task is not tracked and owes nothing yet."""
    ctl, actions = CancelController(G).tick({1: P.COOPERATIVE}, 0.0, running={2})
    assert actions == []
    assert dict(ctl.jobs) == {}


def test_controller_forget_drops_silently() -> None:
    """forget() drops a job without emitting anything; a later attempt starts fresh."""
    ctl, _ = CancelController(G).tick({1: P.COOPERATIVE}, 0.0)
    ctl = ctl.forget(1)
    assert ctl.phase_of(1) is P.NONE
    _, actions = ctl.tick({1: P.COOPERATIVE}, 5.0)
    assert actions == [(1, SetCancelEvent())]


def test_controller_forget_unknown_job_is_a_no_op() -> None:
    """Forgetting a job that is not tracked returns the same controller."""
    ctl = CancelController(G)
    assert ctl.forget(99) is ctl


def test_controller_is_immutable() -> None:
    """tick returns a new controller and leaves the old one and its jobs untouched."""
    before = CancelController(G)
    after, _ = before.tick({1: P.COOPERATIVE}, 0.0)
    assert dict(before.jobs) == {}
    assert after.phase_of(1) is P.COOPERATIVE
    with pytest.raises(TypeError):
        after.jobs[2] = JobCancelState()  # type: ignore[index]


def test_controller_repr_lists_jobs() -> None:
    """The controller repr shows each job's state."""
    ctl, _ = CancelController(G).tick({7: P.COOPERATIVE}, 0.0)
    assert "7: JobCancelState(phase=<CancelPhase.COOPERATIVE: 1>" in repr(ctl)
