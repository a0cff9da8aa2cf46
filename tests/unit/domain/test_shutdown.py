"""Unit tests for the graceful shutdown machine (taskq.domain.shutdown)."""

from __future__ import annotations

import pytest

from taskq.domain.cancel import GracePeriods
from taskq.domain.shutdown import (
    AbandonComplete,
    DrainComplete,
    DrainLocalQueueToPending,
    HardExit,
    JobsInFlight,
    MarkAbandonedStillRunning,
    PersistForcedAndCancelTasks,
    ReleaseLeader,
    SetCancelEventOnInFlight,
    SetShutdownEvent,
    ShutdownEvent,
    ShutdownPhase,
    ShutdownState,
    Signal,
    StopProducer,
    Tick,
    transition,
)

Ph = ShutdownPhase
G = GracePeriods(cancellation_grace_period=30.0, cleanup_grace_period=10.0)


def fresh() -> ShutdownState:
    return ShutdownState(graces=G)


def run(*steps: tuple[ShutdownEvent, float], state: ShutdownState | None = None) -> ShutdownState:
    s = fresh() if state is None else state
    for event, now in steps:
        s, _ = transition(s, event, now)
    return s


def draining() -> ShutdownState:
    return run((Signal(), 100.0))


def cancelling() -> ShutdownState:
    return run((Signal(), 100.0), (DrainComplete(in_flight=2), 101.0))


def forcing() -> ShutdownState:
    return run((Tick(), 131.0), state=cancelling())


def abandoning() -> ShutdownState:
    return run((Tick(), 141.0), state=forcing())


def test_phase_values_match_the_metrics_table() -> None:
    """shutdown_phase values are NONE 0, DRAINING 1 … ABANDONING 4, with DONE after them."""
    assert [(p.name, p.value) for p in Ph] == [
        ("NONE", 0),
        ("DRAINING", 1),
        ("CANCELLING", 2),
        ("FORCING", 3),
        ("ABANDONING", 4),
        ("DONE", 5),
    ]


def test_initial_state_is_not_shutting_down() -> None:
    """Before any signal the machine reports phase 0 and no elapsed time."""
    s = fresh()
    assert (s.phase, int(s.phase), s.elapsed(5.0)) == (Ph.NONE, 0, None)


@pytest.mark.parametrize(
    "event", [Tick(), DrainComplete(in_flight=0), JobsInFlight(count=0), AbandonComplete()]
)
def test_events_before_the_first_signal_are_ignored(event: ShutdownEvent) -> None:
    """Only a signal starts a shutdown; every other event before it is a no-op."""
    assert transition(fresh(), event, 1.0) == (fresh(), ())


def test_first_signal_starts_draining() -> None:
    """The first signal stops the producer, drains the local queue and records its time."""
    s, actions = transition(fresh(), Signal("SIGINT"), 100.0)
    assert actions == (StopProducer(), DrainLocalQueueToPending())
    assert (s.phase, s.signals, s.shutdown_started_at, s.phase_started_at) == (
        Ph.DRAINING,
        1,
        100.0,
        100.0,
    )
    assert (int(s.phase), s.elapsed(112.5)) == (1, 12.5)


def test_draining_has_no_timeout_of_its_own() -> None:
    """A tick during DRAINING changes nothing (the watchdog deadline covers a hung drain)."""
    assert transition(draining(), Tick(), 10_000.0) == (draining(), ())


def test_drain_with_nothing_in_flight_goes_straight_to_done() -> None:
    """When the drain finds no jobs in flight the shutdown ends at once."""
    s, actions = transition(draining(), DrainComplete(in_flight=0), 101.0)
    assert actions == (ReleaseLeader(), SetShutdownEvent())
    assert s.phase is Ph.DONE


def test_drain_with_jobs_in_flight_starts_cancelling() -> None:
    """With jobs in flight the drain leads to CANCELLING, which sets their cancel events."""
    s, actions = transition(draining(), DrainComplete(in_flight=3), 101.0)
    assert actions == (SetCancelEventOnInFlight(),)
    assert (s.phase, s.phase_started_at) == (Ph.CANCELLING, 101.0)


def test_cancelling_waits_for_the_cancellation_grace() -> None:
    """CANCELLING holds until the cancellation grace has elapsed since it began."""
    assert transition(cancelling(), Tick(), 130.9) == (cancelling(), ())


def test_cancellation_grace_elapsed_starts_forcing() -> None:
    """After the cancellation grace, FORCING persists phase 2 and cancels the tasks."""
    s, actions = transition(cancelling(), Tick(), 131.0)
    assert actions == (PersistForcedAndCancelTasks(),)
    assert (s.phase, s.phase_started_at) == (Ph.FORCING, 131.0)


def test_cleanup_grace_elapsed_starts_abandoning() -> None:
    """After the cleanup grace, ABANDONING marks still-running jobs and releases the leader."""
    assert transition(forcing(), Tick(), 140.9) == (forcing(), ())
    s, actions = transition(forcing(), Tick(), 141.0)
    assert actions == (MarkAbandonedStillRunning(), ReleaseLeader())
    assert s.phase is Ph.ABANDONING


def test_abandon_complete_finishes_the_shutdown() -> None:
    """When the abandonment writes land, shutdown_event is set (the leader is already released)."""
    s, actions = transition(abandoning(), AbandonComplete(), 142.0)
    assert actions == (SetShutdownEvent(),)
    assert (s.phase, int(s.phase)) == (Ph.DONE, 5)


@pytest.mark.parametrize("state", [cancelling(), forcing()], ids=["cancelling", "forcing"])
def test_no_jobs_in_flight_ends_waiting_phases_at_once(state: ShutdownState) -> None:
    """In CANCELLING and FORCING the last job finishing ends the shutdown without waiting."""
    s, actions = transition(state, JobsInFlight(count=0), 135.0)
    assert actions == (ReleaseLeader(), SetShutdownEvent())
    assert s.phase is Ph.DONE


def test_jobs_still_in_flight_change_nothing() -> None:
    """A non-zero in-flight count does not move the machine."""
    assert transition(cancelling(), JobsInFlight(count=1), 102.0) == (cancelling(), ())


def test_no_jobs_in_flight_during_draining_waits_for_the_drain() -> None:
    """The drain must finish even when no job is in flight; its completion decides."""
    assert transition(draining(), JobsInFlight(count=0), 100.5) == (draining(), ())


def test_abandoning_waits_for_abandon_complete_not_job_count() -> None:
    """In ABANDONING the count reaching zero does not set shutdown_event under the writes."""
    assert transition(abandoning(), JobsInFlight(count=0), 142.0) == (abandoning(), ())


def test_stray_completions_are_ignored() -> None:
    """Drain completion outside DRAINING and abandon completion outside ABANDONING are no-ops."""
    assert transition(cancelling(), DrainComplete(in_flight=0), 102.0) == (cancelling(), ())
    assert transition(forcing(), AbandonComplete(), 132.0) == (forcing(), ())


def test_late_tick_escalates_only_as_far_as_time_allows() -> None:
    """A tick long overdue forces, but the cleanup grace then counts from that moment."""
    s, actions = transition(cancelling(), Tick(), 500.0)
    assert actions == (PersistForcedAndCancelTasks(),)
    assert (s.phase, s.phase_started_at) == (Ph.FORCING, 500.0)


def test_zero_graces_chain_to_abandoning_in_one_transition() -> None:
    """With zero graces the drain completion runs every owed phase in order at once."""
    s = run((Signal(), 0.0), state=ShutdownState(graces=GracePeriods(0.0, 0.0)))
    s, actions = transition(s, DrainComplete(in_flight=1), 1.0)
    assert actions == (
        SetCancelEventOnInFlight(),
        PersistForcedAndCancelTasks(),
        MarkAbandonedStillRunning(),
        ReleaseLeader(),
    )
    assert s.phase is Ph.ABANDONING


# -- signal counting -------------------------------------------------------------------


def test_second_signal_fast_advances_cancelling_to_forcing() -> None:
    """A second signal in CANCELLING forces at once, and the cleanup grace starts then."""
    s, actions = transition(cancelling(), Signal(), 105.0)
    assert actions == (PersistForcedAndCancelTasks(),)
    assert (s.phase, s.signals, s.phase_started_at) == (Ph.FORCING, 2, 105.0)


def test_second_signal_during_draining_is_remembered() -> None:
    """A second signal does not interrupt the drain; when it completes, forcing follows at once."""
    s, actions = transition(draining(), Signal(), 100.5)
    assert (s.phase, s.signals, actions) == (Ph.DRAINING, 2, ())
    s, actions = transition(s, DrainComplete(in_flight=2), 101.0)
    assert actions == (SetCancelEventOnInFlight(), PersistForcedAndCancelTasks())
    assert (s.phase, s.phase_started_at) == (Ph.FORCING, 101.0)


def test_second_signal_during_draining_with_nothing_in_flight_still_ends_cleanly() -> None:
    """After a second signal an empty drain still goes straight to DONE."""
    s = run((Signal(), 100.5), (DrainComplete(in_flight=0), 101.0), state=draining())
    assert s.phase is Ph.DONE


def test_second_signal_in_forcing_only_counts() -> None:
    """FORCING has nothing to fast-advance: a second signal is only counted."""
    s = run((Tick(), 131.0), state=cancelling())
    s2, actions = transition(s, Signal(), 132.0)
    assert (s2.phase, s2.signals, actions) == (Ph.FORCING, 2, ())


@pytest.mark.parametrize(
    "start",
    [draining(), run((Signal(), 101.0), state=cancelling()), abandoning()],
    ids=["draining", "forcing", "abandoning"],
)
def test_third_signal_hard_exits_with_code_1(start: ShutdownState) -> None:
    """The third signal asks for an immediate exit with code 1, whatever the phase."""
    s = start
    while s.signals < 2:
        s, _ = transition(s, Signal(), 150.0)
    s, actions = transition(s, Signal(), 151.0)
    assert actions == (HardExit(exit_code=1),)
    assert (s.signals, s.hard_exited, s.phase) == (3, True, start.phase)


def test_machine_is_frozen_after_hard_exit() -> None:
    """After the hard exit no event, not even an overdue timer, produces more work."""
    s = run((Signal(), 101.0), (Signal(), 102.0), state=cancelling())
    assert (s.phase, s.hard_exited) == (Ph.FORCING, True)
    for event in (Signal(), Tick(), JobsInFlight(count=0), AbandonComplete()):
        assert transition(s, event, 1e6) == (s, ())


def test_done_absorbs_every_event() -> None:
    """After DONE, signals and every other event leave the state unchanged and emit nothing."""
    done = run((DrainComplete(in_flight=0), 101.0), state=draining())
    for event in (Signal(), Signal(), Signal(), Tick(), JobsInFlight(count=0), AbandonComplete()):
        assert transition(done, event, 1e9) == (done, ())


# -- validation ------------------------------------------------------------------------


def test_time_going_backwards_is_rejected() -> None:
    """A `now` before the current phase began means mixed clocks and raises."""
    with pytest.raises(ValueError, match="backwards"):
        transition(cancelling(), Tick(), 100.5)


def test_negative_job_counts_are_rejected() -> None:
    """In-flight counts cannot be negative."""
    with pytest.raises(ValueError, match="in_flight"):
        DrainComplete(in_flight=-1)
    with pytest.raises(ValueError, match="count"):
        JobsInFlight(count=-1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"phase": Ph.NONE, "signals": 1},
        {"phase": Ph.NONE, "phase_started_at": 1.0},
        {"phase": Ph.DRAINING, "signals": 1},
        {"phase": Ph.DRAINING, "signals": 0, "shutdown_started_at": 1.0, "phase_started_at": 1.0},
        {"phase": Ph.FORCING, "signals": 1, "shutdown_started_at": 5.0, "phase_started_at": 4.0},
        {"phase": Ph.CANCELLING, "signals": 2, "shutdown_started_at": 1.0, "phase_started_at": 2.0},
    ],
)
def test_illegal_states_cannot_be_built(kwargs: dict[str, object]) -> None:
    """States that no event sequence can reach are rejected on construction."""
    with pytest.raises(ValueError):  # noqa: PT011 - the message varies per invariant
        ShutdownState(**kwargs)  # type: ignore[arg-type]


def test_repr_shows_phase_signals_and_times_but_not_config() -> None:
    """The repr carries what an operator needs in a log line and omits the fixed graces."""
    text = repr(cancelling())
    assert "CANCELLING" in text
    assert "signals=1" in text
    assert "shutdown_started_at=100.0" in text
    assert "graces" not in text
