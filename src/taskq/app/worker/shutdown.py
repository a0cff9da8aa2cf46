"""The shutdown orchestrator: carries out :func:`taskq.domain.shutdown.transition`.

SIGTERM / SIGINT (``loop.add_signal_handler``), until-idle and
:meth:`ShutdownOrchestrator.request` all feed it a ``Signal``. Its loop feeds
the machine ``Tick`` (every second on the clock, for the grace timers) and
``JobsInFlight`` (whenever a consumer finishes a job), and does what each
transition asks:

- StopProducer: no more claims;
- DrainLocalQueueToPending: with no claim in flight, empty the local queue
  (those jobs were claimed but never started) and ``drain_unstarted`` the
  store, which re-pends every claimed-but-unstarted row of this worker (every
  job a consumer holds is marked first, so that is exactly what never ran);
- SetCancelEventOnInFlight: every in-flight job's ``cancel_event``
  (a cooperative return is then an interruption, see ``consumer``);
- PersistForcedAndCancelTasks: ``task.cancel()`` each job. Nothing is written:
  a persisted cancel phase means a *user* asked to cancel, and the job would
  end cancelled (the worker guide writes cancel_phase=2 here; the shutdown is
  not a cancel request, so it does not);
- MarkAbandonedStillRunning: what still runs is handed back
  (``JobFinisher.interrupt``): a retryable job waits again, attempt not counted,
  due once this process has surely ended; a non-retryable one is abandoned.
  A job whose actor was not yet invoked is released unrun;
- ReleaseLeader: the leader loop gives up the lock and does not compete again;
- SetShutdownEvent: every sibling returns;
- HardExit (third signal): hand back every job by the same rule in one write
  (bounded by ``hand_back.LEAVING_BUDGET``), flush the logs and leave with code 1.

No path of the shutdown ends a job ``cancelled``: only a user's cancel does.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Final

from taskq.app.worker import events
from taskq.app.worker.attempt_outcome import WORKER_SHUTDOWN
from taskq.app.worker.hand_back import LEAVING_BUDGET, hand_back, until_this_process_ends
from taskq.app.worker.outcome_writes import log_interrupted
from taskq.app.worker.state import ActiveJob
from taskq.app.worker.task_views import ShutdownView
from taskq.app.worker.waiting import wait_event, with_timeout
from taskq.app.worker.watchdog import dump_tasks_on_request
from taskq.domain.cancel import GracePeriods
from taskq.domain.errors import LeaseLost, TaskQError
from taskq.domain.job import Lease
from taskq.domain.shutdown import (
    HARD_EXIT_CODE,
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
    ShutdownAction,
    ShutdownEvent,
    ShutdownPhase,
    ShutdownState,
    Signal,
    StopProducer,
    Tick,
    transition,
)
from taskq.ports.store_params import Interruption

#: How often the grace timers are checked while a shutdown runs (clock seconds).
SHUTDOWN_TICK: Final = 1.0
_ABANDON_MESSAGE: Final = (
    "interrupted by the worker's shutdown: still running when its cleanup grace ran out "
    "(its code may have run on until the old process ended)"
)

HardExitHook = Callable[[int], None]


class ShutdownOrchestrator:
    """Owns the worker's :class:`ShutdownState`; :meth:`run` is a worker sibling."""

    def __init__(self, state: ShutdownView, *, hard_exit: HardExitHook) -> None:
        self.state = state
        settings = state.settings
        self.machine = ShutdownState(
            graces=GracePeriods(
                cancellation_grace_period=settings.cancellation_grace_period,
                cleanup_grace_period=settings.cleanup_grace_period,
            )
        )
        self._hard_exit = hard_exit
        self._requests: deque[str] = deque()
        # The phase each pending request arrived in, for its log record.
        self._received_in: deque[ShutdownPhase] = deque()
        self._requested = asyncio.Event()

    def __repr__(self) -> str:
        return f"<ShutdownOrchestrator {self.machine!r}>"

    @property
    def phase(self) -> ShutdownPhase:
        return self.machine.phase

    def request(self, reason: str = "SIGTERM") -> None:
        """A shutdown signal (SIGTERM, SIGINT, until-idle, a test). Call on the loop.

        It is applied in order by :meth:`run`; ``shutdown-signal`` is logged
        then, saying what it did (see :func:`_signal_effect`).
        """
        self.state.stopping.begin(self.state.clock.monotonic())
        self._received_in.append(self.machine.phase)
        self._requests.append(reason)
        self._requested.set()

    async def run(self) -> None:
        """Drive the machine until the shutdown event is set (by it or by anyone else)."""
        state = self.state
        while not state.shutdown_event.is_set():
            if self.machine.phase is ShutdownPhase.NONE:
                await wait_event(state.clock, None, self._requested, state.shutdown_event)
            else:
                await wait_event(
                    state.clock,
                    SHUTDOWN_TICK,
                    self._requested,
                    state.active.changed,
                    state.shutdown_event,
                )
            self._requested.clear()
            while self._requests:
                await self._feed(Signal(self._requests.popleft()))
            if state.active.changed.is_set():
                state.active.changed.clear()
                await self._feed(JobsInFlight(state.active.busy))
            await self._feed(Tick())

    async def _feed(self, event: ShutdownEvent) -> None:
        before = self.machine.phase
        counted = self.machine.signals
        self.machine, actions = transition(self.machine, event, self.state.clock.monotonic())
        if isinstance(event, Signal):
            received_in = self._received_in.popleft() if self._received_in else before
            did, effect = _signal_effect(
                before, self.machine, counted=counted, received_in=received_in, actions=actions
            )
            events.emit(
                events.SHUTDOWN_SIGNAL,
                signal=event.name,
                signum=_signum(event.name),
                count=self.machine.signals,
                received_during=received_in.name,
                applied_during=before.name,
                phase=self.machine.phase.name,
                action=did,
                effect=effect,
            )
        if self.machine.phase is not before:
            events.emit(
                events.SHUTDOWN_PHASE,
                phase=self.machine.phase.name,
                previous=before.name,
                cause=_phase_cause(event, before, self.machine),
                in_flight=self.state.active.busy,
                signals=self.machine.signals,
            )
        for action in actions:
            await self._do(action)

    async def _do(self, action: ShutdownAction) -> None:
        state = self.state
        if isinstance(action, StopProducer):
            state.producer_stop.set()
        elif isinstance(action, DrainLocalQueueToPending):
            await self._drain()
            await self._feed(DrainComplete(state.active.busy))
        elif isinstance(action, SetCancelEventOnInFlight):
            state.stopping.cancel = "cooperative"
            for active in state.active:
                active.request_cancel("shutdown")
        elif isinstance(action, PersistForcedAndCancelTasks):
            state.stopping.cancel = "forced"
            # Nothing persisted: a cancel phase in the row would read as a user's request.
            for active in state.active:
                active.force_cancel("shutdown")
        elif isinstance(action, MarkAbandonedStillRunning):
            for active in state.active:
                await self._abandon(active)
            await self._feed(AbandonComplete())
        elif isinstance(action, ReleaseLeader):
            state.leadership.let_go()
        elif isinstance(action, SetShutdownEvent):
            state.shutdown_event.set()
        elif isinstance(action, HardExit):
            budget = min(LEAVING_BUDGET, state.settings.heartbeat_command_timeout)
            handed = await hand_back(
                state,
                error_class=WORKER_SHUTDOWN,
                error="interrupted by a third shutdown signal: the worker left at once",
                budget=budget,
            )
            events.emit(
                events.SHUTDOWN_HARD_EXIT,
                logging.CRITICAL,
                exit_code=action.exit_code,
                jobs_handed_back=handed,
                note="jobs were handed back"
                if handed is not None
                else f"the hand-back did not land within {budget:g}s; "
                "the leader's sweep reclaims the jobs when their leases expire",
            )
            events.flush_logs()
            self._hard_exit(action.exit_code)

    async def _drain(self) -> None:
        state = self.state
        # The claim lock: no claim is between the store and the local queue now.
        async with state.claim_lock:
            cleared = state.local_queue.clear()
            # A job its claim started for a consumer that had not taken it yet never ran
            # either: give it back, as the drain does the unstarted ones.
            for job in cleared:
                if job.started:
                    await self._give_back(job.lease, job.id)
            drained: int | None = None
            # Every job a consumer holds gets its start mark first, so the drain
            # re-pends only what was still queued. Unconfirmed marks: no drain
            # (the queued jobs come back when their leases expire instead).
            marked = state.start_marks is None or await _bounded(
                state, state.start_marks.flush(), False
            )
            if marked and state.ledger.unwritten:
                marked = await _bounded(state, _mark_unwritten(state), False)
            if not marked:
                events.emit(
                    events.JOB_WRITE_FAILED,
                    logging.ERROR,
                    write="drain_unstarted",
                    error="start marks of running jobs were not confirmed; "
                    "queued jobs are left to their lease",
                )
            else:
                try:
                    drained = await with_timeout(
                        state.clock,
                        state.settings.heartbeat_command_timeout,
                        state.store.drain_unstarted(state.worker_id),
                        abandon=True,
                    )
                except (TaskQError, TimeoutError) as exc:
                    events.emit(
                        events.JOB_WRITE_FAILED,
                        logging.ERROR,
                        write="drain_unstarted",
                        error=str(exc),
                    )
        events.emit(
            events.SHUTDOWN_PHASE,
            phase="DRAINED",
            repended=drained,
            discarded_local=len(cleared),
            in_flight=state.active.busy,
        )
        for job in cleared:  # one line per job given back unrun, naming it
            fields: dict[str, Any] = {"job_id": job.id, "actor": job.actor, "queue": job.queue}
            if drained is not None or job.started:
                events.emit(
                    events.JOB_HANDED_BACK,
                    **fields,
                    reason="drain",
                    then="never started here: waits again where it was in line, its attempt kept",
                )
            else:
                events.emit(
                    events.JOB_LEFT_TO_LEASE,
                    logging.WARNING,
                    **fields,
                    reason="drain",
                    then="the drain did not land: pending again when its lease ends",
                )

    async def _give_back(self, lease: Lease, job_id: int) -> None:
        """Release a job that never ran (attempt refunded); a failure leaves it to its lease."""
        state = self.state
        try:
            await with_timeout(
                state.clock,
                state.settings.heartbeat_command_timeout,
                state.store.release(lease, delay=timedelta(0)),
                abandon=True,
            )
        except LeaseLost:
            return
        except (TaskQError, TimeoutError) as exc:
            events.emit(
                events.JOB_WRITE_FAILED,
                logging.ERROR,
                job_id=job_id,
                write="release",
                error=str(exc),
            )

    async def _abandon(self, active: ActiveJob) -> None:
        """Hand back a job still running when the cleanup grace ran out."""
        job, state = active.job, self.state
        active.abandon_queued = True
        if active.task is None:
            # Its actor was never invoked (waiting for its start mark or a limit).
            await self._give_back(job.lease, job.id)
            return
        retryable = active.ref.retry.kind != "non_retryable"
        request = Interruption(
            lease=job.lease,
            retryable=retryable,
            # Due once this process has surely ended: its code may still be running here.
            run_at=state.clock.now() + until_this_process_ends(state),
            error_class=WORKER_SHUTDOWN,
            error=_ABANDON_MESSAGE,
        )
        try:
            await with_timeout(
                state.clock,
                state.settings.heartbeat_command_timeout,
                asyncio.shield(state.store.interrupt(request)),
                abandon=True,
            )
        except LeaseLost:
            return  # it ended (or was abandoned by the heartbeat) meanwhile
        except (TaskQError, TimeoutError) as exc:
            events.emit(
                events.JOB_WRITE_FAILED,
                logging.ERROR,
                job_id=job.id,
                write="interrupt",
                error=str(exc),
            )
            return
        log_interrupted(active, retryable, _ABANDON_MESSAGE)


def install_signal_handlers(orchestrator: ShutdownOrchestrator) -> Callable[[], None]:
    """Route SIGTERM, SIGINT and SIGHUP to the orchestrator, SIGUSR2 to the task dump;
    returns the undo function.

    SIGHUP (the terminal or SSH session went away) shuts down gracefully too:
    its default action would kill the worker with no cleanup. SIGUSR2, whose
    default action kills the process as well, logs ``worker-task-dump`` (every
    asyncio task and its await site) and the worker goes on. Where the loop
    cannot take signal handlers (Windows, a non-main thread) nothing is installed.
    """
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    hup = [signal.SIGHUP] if hasattr(signal, "SIGHUP") else []
    handlers: list[tuple[signal.Signals, Callable[[str], None]]] = [
        (sig, orchestrator.request) for sig in (signal.SIGTERM, signal.SIGINT, *hup)
    ]
    if hasattr(signal, "SIGUSR2"):
        handlers.append((signal.SIGUSR2, dump_tasks_on_request))
    for sig, handler in handlers:
        try:
            loop.add_signal_handler(sig, handler, sig.name)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed.append(sig)

    def remove() -> None:
        for sig in installed:
            loop.remove_signal_handler(sig)

    return remove


def _signum(name: str) -> int | None:
    """The number of the signal called ``name`` (None for a request that is no signal,
    such as until-idle's)."""
    try:
        return int(signal.Signals[name])
    except KeyError:
        return None


def _signal_effect(
    before: ShutdownPhase,
    after: ShutdownState,
    *,
    counted: int,
    received_in: ShutdownPhase,
    actions: tuple[ShutdownAction, ...],
) -> tuple[str, str]:
    """What a signal did, as a short ``action`` and a sentence, from the machine's
    transition (the domain's rules: see :mod:`taskq.domain.shutdown`)."""
    if any(isinstance(a, HardExit) for a in actions):
        return "hard-exit", (
            f"signal {after.signals}: the worker exits at once with code "
            f"{HARD_EXIT_CODE}, without finishing the shutdown"
        )
    if after.signals == counted:
        if after.hard_exited:
            return "ignored", "ignored: the worker is already exiting"
        return "ignored", "ignored: the shutdown has already ended"
    if before is ShutdownPhase.NONE:
        return "start", "graceful shutdown started: DRAINING (no more claims)"
    then_forcing = (
        "the rest of the cooperative wait is skipped: FORCING now"
        if after.phase is ShutdownPhase.FORCING
        else f"the shutdown is now {after.phase.name}"
    )
    if before is ShutdownPhase.DRAINING:
        return "remembered", (
            "remembered: the drain finishes first, then the shutdown goes straight "
            "to FORCING; a third signal exits at once"
        )
    if before is ShutdownPhase.CANCELLING:
        if received_in in (ShutdownPhase.NONE, ShutdownPhase.DRAINING):
            return "forcing", (
                f"arrived while the drain ran and applied once it finished: {then_forcing}"
            )
        return "forcing", then_forcing
    return "counted", (
        f"counted only: the shutdown is already {before.name} and goes on as it was; "
        "a third signal exits at once"
    )


def _phase_cause(event: ShutdownEvent, before: ShutdownPhase, after: ShutdownState) -> str:
    """Why the machine moved from ``before`` to ``after.phase`` on ``event``."""
    phase = after.phase
    if isinstance(event, Signal):
        if before is ShutdownPhase.NONE:
            return "first signal"
        if before is ShutdownPhase.CANCELLING:
            return "second signal"
    if isinstance(event, DrainComplete):
        if phase is ShutdownPhase.DONE:
            return "drain finished with no job in flight"
        if phase is ShutdownPhase.FORCING and after.signals >= 2:
            return "drain finished; a second signal came during it"
        return "drain finished with jobs in flight"
    if isinstance(event, JobsInFlight) and phase is ShutdownPhase.DONE:
        return "no job in flight"
    if isinstance(event, AbandonComplete):
        return "abandon writes done"
    if phase is ShutdownPhase.FORCING:
        return "cancellation grace elapsed"
    if phase is ShutdownPhase.ABANDONING:
        return "cleanup grace elapsed"
    return type(event).__name__


async def _mark_unwritten(state: ShutdownView) -> bool:
    """Start marks for the jobs that ran but whose terminal write failed.

    They left the consumers, and so the start marks, without a ``started_at``
    of their own: the drain would take them for jobs that never started and
    re-pend them with the attempt refunded, to run again. Marked, they stay with
    their lease and the sweep. False when the marks did not land (then nothing
    is drained).
    """
    try:
        await state.store.mark_started(tuple(state.ledger.unwritten))
    except Exception as exc:  # the store that failed the writes may fail this too
        events.emit(
            events.JOB_WRITE_FAILED,
            logging.ERROR,
            write="drain_unstarted",
            error=f"start marks of jobs whose outcome was not written failed ({exc}); "
            "queued jobs are left to their lease",
        )
        return False
    return True


async def _bounded(state: ShutdownView, work: Awaitable[bool], timed_out: bool) -> bool:
    """``work`` given up after ``heartbeat_command_timeout`` (then ``timed_out``): a
    shutdown during an outage must not wait out the termination deadline."""
    try:
        return await with_timeout(
            state.clock, state.settings.heartbeat_command_timeout, work, abandon=True
        )
    except TimeoutError:
        return timed_out
