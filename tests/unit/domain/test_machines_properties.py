"""Property tests: random event sequences against the cancel, shutdown and lag machines."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from taskq.domain.cancel import (
    CancelAction,
    CancelController,
    CancelTask,
    Forget,
    GracePeriods,
    JobCancelState,
    Observed,
    PersistForced,
    QueueAbandon,
    SetCancelEvent,
    step,
)
from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.shutdown import (
    AbandonComplete,
    DrainComplete,
    HardExit,
    JobsInFlight,
    PersistForcedAndCancelTasks,
    ReleaseLeader,
    SetShutdownEvent,
    ShutdownEvent,
    ShutdownPhase,
    ShutdownState,
    Signal,
    Tick,
    transition,
)
from taskq.domain.watchdog import Idle, LivenessTable, LoopLagDetector, Trip

# Time steps include zero (several events at one instant) and long gaps.
time_steps = st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=60.0))
graces = st.builds(
    GracePeriods,
    st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=40.0)),
    st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=20.0)),
)
phases = st.sampled_from(list(CancelPhase))

# -- cancel: one job -------------------------------------------------------------------

# running is False rarely, so most sequences get far into the phases
ticks = st.tuples(
    time_steps,
    st.builds(Observed, phases, st.sampled_from([True] * 9 + [False])),
)

ACTION_PHASE: dict[type[CancelAction], CancelPhase] = {
    SetCancelEvent: CancelPhase.COOPERATIVE,
    PersistForced: CancelPhase.FORCED,
    CancelTask: CancelPhase.FORCED,
    QueueAbandon: CancelPhase.ABANDON_PENDING,
}


@given(graces, st.floats(min_value=0.0, max_value=1e6), st.lists(ticks, max_size=40))
def test_cancel_job_machine_invariants(
    g: GracePeriods, start: float, seq: list[tuple[float, Observed]]
) -> None:
    """Per job: phases only advance, each action at most once and in order, graces respected."""
    state = JobCancelState()
    now = start
    emitted: list[CancelAction] = []
    max_persisted = CancelPhase.NONE
    for dt, obs in seq:
        now += dt
        if obs.running and not state.forgotten:
            max_persisted = max(max_persisted, obs.persisted)
        before = state
        state, actions = step(state, obs, now, graces=g)
        emitted.extend(actions)
        # phases never go backwards; a forgotten job is frozen
        assert state.phase >= before.phase
        if before.forgotten:
            assert (state, actions) == (before, ())
        # PersistForced only while the store still says < FORCED, and always right before
        # CancelTask
        if PersistForced() in actions:
            assert obs.persisted < CancelPhase.FORCED
            i = actions.index(PersistForced())
            assert actions[i + 1] == CancelTask()
        # every action belongs to a phase the job has now reached
        for a in actions:
            if not isinstance(a, Forget):
                assert state.phase >= ACTION_PHASE[type(a)]

    counts = Counter(type(a) for a in emitted)
    assert all(n == 1 for n in counts.values()), counts
    # the owed actions were all emitted, in phase order, with Forget last
    expected = [SetCancelEvent, CancelTask, QueueAbandon][: int(state.phase)]
    assert [type(a) for a in emitted if not isinstance(a, (PersistForced, Forget))] == expected
    if state.forgotten:
        assert isinstance(emitted[-1], Forget)
    # escalation by time alone waits for the full graces
    if state.phase >= CancelPhase.FORCED and max_persisted < CancelPhase.FORCED:
        assert state.forced_at is not None
        assert state.cooperative_at is not None
        assert state.forced_at - state.cooperative_at >= g.cancellation_grace_period
    if state.phase is CancelPhase.ABANDON_PENDING and max_persisted < CancelPhase.ABANDON_PENDING:
        assert state.abandon_queued_at is not None
        assert state.forced_at is not None
        assert state.abandon_queued_at - state.forced_at >= g.cleanup_grace_period
    if state.phase is CancelPhase.ABANDON_PENDING and max_persisted < CancelPhase.FORCED:
        assert state.abandon_queued_at is not None
        assert state.cooperative_at is not None
        elapsed = state.abandon_queued_at - state.cooperative_at
        assert elapsed >= g.cancellation_grace_period + g.cleanup_grace_period


# -- cancel: the controller ------------------------------------------------------------

JOB_IDS = st.integers(min_value=1, max_value=4)


@dataclass(frozen=True)
class CtlTick:
    dt: float
    observed: dict[int, CancelPhase]
    running: frozenset[int] | None


@dataclass(frozen=True)
class CtlForget:
    job_id: int


ctl_ops = st.one_of(
    st.builds(
        CtlTick,
        time_steps,
        st.dictionaries(JOB_IDS, phases, max_size=4),
        st.one_of(st.none(), st.frozensets(JOB_IDS)),
    ),
    st.builds(CtlForget, JOB_IDS),
)


@given(graces, st.lists(ctl_ops, max_size=40))
def test_cancel_controller_never_repeats_an_action_within_an_attempt(
    g: GracePeriods, ops: list[CtlTick | CtlForget]
) -> None:
    """Across many jobs, each action is emitted at most once per job attempt and phases advance."""
    ctl = CancelController(g)
    now = 0.0
    seen: dict[int, Counter[type[CancelAction]]] = {}
    for op in ops:
        if isinstance(op, CtlForget):
            ctl = ctl.forget(op.job_id)
            seen.pop(op.job_id, None)
            continue
        now += op.dt
        before = {j: ctl.phase_of(j) for j in ctl.jobs}
        ctl, actions = ctl.tick(op.observed, now, running=op.running)
        for job_id, action in actions:
            seen.setdefault(job_id, Counter())[type(action)] += 1
            assert seen[job_id][type(action)] == 1, (job_id, action)
            if isinstance(action, Forget):
                seen.pop(job_id)
                assert job_id not in ctl.jobs
        for job_id, phase in before.items():
            if job_id in ctl.jobs:
                assert ctl.phase_of(job_id) >= phase
        # only jobs the heartbeat reported and that run locally are tracked
        for job_id in ctl.jobs:
            assert job_id in op.observed
            assert op.running is None or job_id in op.running


# -- shutdown --------------------------------------------------------------------------

shutdown_events: st.SearchStrategy[ShutdownEvent] = st.one_of(
    st.builds(Signal, st.sampled_from(["SIGTERM", "SIGINT"])),
    st.builds(DrainComplete, st.integers(min_value=0, max_value=3)),
    st.just(Tick()),
    st.just(Tick()),
    st.builds(JobsInFlight, st.integers(min_value=0, max_value=3)),
    st.just(AbandonComplete()),
)


@given(graces, st.lists(st.tuples(time_steps, shutdown_events), max_size=50))
def test_shutdown_machine_invariants(
    g: GracePeriods, seq: list[tuple[float, ShutdownEvent]]
) -> None:
    """Phases only advance, no action repeats, HardExit only on signal 3; DONE and it freeze."""
    state = ShutdownState(graces=g)
    now = 0.0
    emitted: Counter[type[object]] = Counter()
    signals_before_done = 0
    cancelling_since: float | None = None
    for dt, event in seq:
        now += dt
        before = state
        state, actions = transition(state, event, now)
        assert isinstance(state.phase, ShutdownPhase)
        assert state.phase >= before.phase
        if before.phase is ShutdownPhase.DONE or before.hard_exited:
            assert (state, actions) == (before, ())
            continue
        if isinstance(event, Signal):
            signals_before_done += 1
        assert (HardExit() in actions) == (isinstance(event, Signal) and signals_before_done == 3)
        for a in actions:
            emitted[type(a)] += 1
            assert emitted[type(a)] == 1, a
        # shutdown_event is set exactly when DONE is entered, after the leader is released
        assert (SetShutdownEvent() in actions) == (state.phase is ShutdownPhase.DONE)
        if state.phase is ShutdownPhase.DONE:
            assert emitted[ReleaseLeader] == 1
        if state.phase is not ShutdownPhase.NONE:
            assert state.shutdown_started_at is not None
            assert state.shutdown_started_at <= now
        # forcing is earned: by a second signal or by the full cancellation grace
        if before.phase is ShutdownPhase.CANCELLING:
            cancelling_since = before.phase_started_at
        elif before.phase is ShutdownPhase.DRAINING:
            cancelling_since = now  # a drain completion enters CANCELLING now
        if PersistForcedAndCancelTasks() in actions and state.signals < 2:
            assert cancelling_since is not None
            assert now - cancelling_since >= g.cancellation_grace_period


@given(graces, st.lists(time_steps, max_size=10))
def test_shutdown_without_jobs_always_ends_cleanly(g: GracePeriods, gaps: list[float]) -> None:
    """Signal, ticks, an empty drain: the shutdown reaches DONE with shutdown_event set once."""
    state, actions = transition(ShutdownState(graces=g), Signal(), 0.0)
    now = 0.0
    for dt in gaps:
        now += dt
        state, more = transition(state, Tick(), now)
        actions += more
    state, more = transition(state, DrainComplete(in_flight=0), now)
    assert state.phase is ShutdownPhase.DONE
    assert (actions + more).count(SetShutdownEvent()) == 1


# -- watchdog --------------------------------------------------------------------------


@given(
    st.lists(
        st.tuples(time_steps, st.sampled_from(["a", "b", "c"]), st.floats(0.1, 30.0)),
        max_size=30,
    ),
    st.floats(1.0, 5.0),
    st.floats(0.1, 60.0),
)
def test_stale_matches_its_definition(
    ticks_: list[tuple[float, str, float]], factor: float, floor: float
) -> None:
    """A loop is reported stale exactly when its age exceeds max(period × factor, floor)."""
    table = LivenessTable()
    now = 0.0
    last: dict[str, tuple[float, float]] = {}
    for dt, name, period in ticks_:
        now += dt
        table = table.tick(name, period, now)
        last[name] = (period, now)
    later = now + 45.0
    expected = [
        (name, later - t)
        for name, (period, t) in sorted(last.items())
        if later - t > max(period * factor, floor)
    ]
    assert table.stale(later, factor, floor) == expected


@given(st.lists(st.tuples(time_steps, st.sampled_from(["beat", "check", "tick"])), max_size=40))
def test_loop_lag_matches_a_reference_model(ops: list[tuple[float, str]]) -> None:
    """The lag detector trips exactly when armed and a full budget passed with no beat."""
    budget, grace = 10.0, 30.0
    det = LoopLagDetector(started_at=0.0, budget=budget, startup_grace=grace)
    now = 0.0
    first_tick: float | None = None
    last_beat: float | None = None
    for dt, op in ops:
        now += dt
        if op == "beat":
            det = det.beat(now)
            last_beat = now
        elif op == "tick":
            det = det.on_liveness_tick(now)
            first_tick = now if first_tick is None else first_tick
        else:
            det, verdict = det.check(now)
            # model: armed at the first liveness tick or at the end of the startup grace
            armed_at = min(first_tick if first_tick is not None else grace, grace)
            if now < armed_at:
                assert verdict == Idle()
                continue
            since = armed_at if last_beat is None else max(last_beat, armed_at)
            assert isinstance(verdict, Trip) == (now - since > budget)
