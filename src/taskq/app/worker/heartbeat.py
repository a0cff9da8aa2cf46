"""The heartbeat loop: liveness, lease extension, cancel phases, isolate-self.

Every ``heartbeat_interval`` one ``store.heartbeat`` call (one transaction)
records the worker as alive, extends the lease of every running job it owns,
pings the leader row when this worker leads, and reports those jobs with
their persisted cancel phase. Beside it, never holding it up, the worker's
reservation leases are extended in the rate limiter (``_extend_reservations``).
The :class:`~taskq.domain.cancel.CancelController` turns the phases into
actions, carried out here:

- ``SetCancelEvent`` → the job's ``ctx.cancel_event`` (cooperative cancel);
- ``PersistForced`` → ``store.escalate_cancel``; ``CancelTask`` → ``task.cancel()``;
- ``QueueAbandon`` → after the heartbeat call, ``finish(status=abandoned)``
  (the post-transaction step: the abandon write must not hold up the beat).

A job this worker is running that the heartbeat no longer reports was
reclaimed by someone else: it is logged (``job-lease-lost``) and asked to stop.
A job the heartbeat reports that this worker never received (a claim whose
reply was lost) is given back (``job-orphan-released``). A job that ran and
whose outcome write gave up is reported but its lease is not extended
(``Heartbeat.let_lapse``): it expires and the leader's sweep reclaims it.

Each beat is given up after ``heartbeat_command_timeout`` (abandoned, not
waited for: on a blackholed connection the cancellation hangs too). After more
than ``max_heartbeat_failures`` consecutive failures, or sooner when the next
beat could not end before the leases last extended run out, the worker
isolates itself: ``hand_back`` gives its jobs back by the rule for
interruptions (unstarted and retryable ones wait again, attempt not counted;
started non-retryable ones crash), local tasks are cancelled, and the shutdown
event is set, so the process exits with code 1.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Final

from taskq.app.worker import events
from taskq.app.worker.attempt_log import job_fields
from taskq.app.worker.exit_codes import ExitCode
from taskq.app.worker.hand_back import hand_back
from taskq.app.worker.startup import worker_info
from taskq.app.worker.state import ActiveJob
from taskq.app.worker.task_views import HeartbeatView
from taskq.app.worker.waiting import (
    first_done,
    kept,
    wait_event,
    with_timeout,
)
from taskq.domain.cancel import CancelTask, PersistForced, QueueAbandon, SetCancelEvent
from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import LeaseLost, StoreTimeout, TaskQError
from taskq.domain.job import Lease
from taskq.domain.status import JobStatus
from taskq.ports.rate_limiter import RateLimiter
from taskq.ports.store_params import Finish, Heartbeat, HeartbeatReport

#: How much sooner than the beat's bound the store's own bound ends (at most a fifth of
#: it): the time its driver may take to give the statement up and say what it waited
#: for (psycopg waits up to 0.5 s for the server to acknowledge a cancel).
STORE_VERDICT_LEAD: Final = 0.6
#: Error class of the attempts isolate-self interrupts.
HEARTBEAT_LOST: Final = "HeartbeatLost"
_ABANDON_MESSAGE: Final = (
    "still running cleanup_grace_period after its task was cancelled; abandoned"
)


async def run_heartbeat(state: HeartbeatView) -> None:
    """Beat every heartbeat_interval until the shutdown event (or isolate-self)."""
    interval = state.settings.heartbeat_interval
    clock = state.clock
    failures = 0
    extended_at = clock.monotonic()  # the leases were set (at the latest) by the claims
    # Its first tick is an interval away: listed from now in /ready's loop_tick_ages and
    # taskq_loop_tick_age_seconds (age since start), not missing for the first 10 s.
    state.liveness.register("heartbeat", interval)
    while not await wait_event(clock, interval, state.shutdown_event):
        state.liveness.tick("heartbeat", interval)
        started = clock.monotonic()
        error = await beat(state)
        if error is None:
            failures, extended_at = 0, started
            state.watch.store_suspect = False
            continue
        failures += 1
        state.watch.store_suspect = True
        state.metrics.heartbeat_failed()
        took = clock.monotonic() - started
        events.emit(
            events.HEARTBEAT_FAILED,
            logging.WARNING,
            consecutive_failures=failures,
            max_heartbeat_failures=state.settings.max_heartbeat_failures,
            error=error,  # say, the pool is exhausted or the server is unreachable
        )
        # The leases run out at extended_at + lock_lease; a next beat as slow as this
        # one, then the isolation, must end before that, or the sweep hands the jobs
        # to another worker while they still run here.
        lapses = clock.monotonic() + interval + 2 * took >= extended_at + state.settings.lock_lease
        if failures > state.settings.max_heartbeat_failures or lapses:
            await isolate_self(state, failures)
            break
    state.liveness.forget("heartbeat")


async def beat(state: HeartbeatView) -> str | None:
    """One heartbeat and its cancel-phase work; why the heartbeat call failed, else None."""
    watched = {a.job.id: a for a in state.active}
    _extend_reservations(state)  # beside the heartbeat call, never holding it up
    timeout = state.settings.heartbeat_command_timeout
    try:
        report = await with_timeout(
            state.clock,
            timeout,
            # Abandoned on timeout: a blackholed connection can hang the cancellation too.
            state.store.heartbeat(
                Heartbeat(
                    worker_id=state.worker_id,
                    lease=state.lease,
                    is_leader=state.leadership.is_leader,
                    let_lapse=tuple(state.ledger.unwritten),
                    timeout=timedelta(seconds=_store_bound(timeout)),
                )
            ),
            abandon=True,
        )
    except (TaskQError, TimeoutError, OSError) as exc:
        return _beat_error(exc, timeout)
    if not report.registered:
        await _register_again(state)
    abandons = await _apply_cancel_phases(state, report)
    await _release_cancelled_in_queue(state, report)
    _flag_lost_leases(state, report, watched)
    for active in abandons:
        await _abandon(state, active)
    await _release_orphans(state, report)
    return None


def _store_bound(timeout: float) -> float:
    """The bound the heartbeat call is given (``Heartbeat.timeout``): ``STORE_VERDICT_LEAD``
    before the beat's own, at most a fifth of it, so a store that can tell what it waited
    for says so before the beat gives the call up."""
    return timeout - min(STORE_VERDICT_LEAD, timeout / 5)


def _beat_error(exc: BaseException, timeout: float) -> str:
    """Why a heartbeat call failed, saying what it waited for when the store told."""
    bound = f"TASKQ_HEARTBEAT_COMMAND_TIMEOUT={timeout:g}s"
    if isinstance(exc, StoreTimeout):
        return f"gave up waiting for {exc.waited_for} ({bound}): {exc}"
    if isinstance(exc, TimeoutError) and not isinstance(exc, TaskQError):
        return f"no answer within {bound}; the store did not say what the call waited for"
    return str(exc) or type(exc).__name__


async def _register_again(state: HeartbeatView) -> None:
    """Put back this worker's ``workers`` row, which a stale-workers sweep removed (the
    process was paused past 2 x lock_lease): it is alive and keeps working. A failure is
    logged; the next beat finds the row still missing and tries again."""
    events.emit(events.WORKER_REREGISTERED, logging.WARNING, worker_id=state.worker_id)
    try:
        await with_timeout(
            state.clock,
            state.settings.heartbeat_command_timeout,
            state.store.register_worker(worker_info(state)),
            abandon=True,  # as the beat: a dropped connection must not hold the heartbeat
        )
    except (TaskQError, TimeoutError, OSError) as exc:
        error = str(exc) or type(exc).__name__
        events.emit(events.HEARTBEAT_FAILED, logging.WARNING, error=f"re-register: {error}")


async def _release_orphans(state: HeartbeatView, report: HeartbeatReport) -> None:
    """Give back owned jobs this worker never received (a claim whose reply was lost).

    A claim can commit and its answer never arrive (a dropped connection): its
    jobs are running and locked by this worker, which knows nothing of them, and
    every heartbeat would extend their leases for as long as it lives. The same
    goes for a start mark that landed but whose answer was lost. A job the
    heartbeat reports that this worker does not hold (running, queued, being
    marked or written) on two beats in a row (a claim under way during one beat
    is answered long before the next) never ran here: it is released, pending
    again at once, its attempt refunded, even if a claim marked it started.
    Should that claim's answer arrive after all, the producer drops the job
    unrun (``state.watch.given_back``). A job that ran and whose write gave up is not
    given back: its lease lapses (see ``beat``) and the sweep reclaims it, as it
    would a crashed worker's.
    """
    if state.stopping.in_progress:
        return  # the shutdown's drain and the sweep own what is left
    # A job that ran unwritten stops mattering once this lease of it is gone.
    state.ledger.keep_unwritten(view.lease for view in report.running)
    held = state.active.ids() | state.ledger.writing
    held.update(lease.job_id for lease in state.ledger.unwritten)
    held.update(job.id for job in state.local_queue.snapshot())
    unknown = {view.lease for view in report.running if view.lease.job_id not in held}
    orphans = sorted(unknown & state.watch.orphan_suspects, key=lambda lease: lease.job_id)
    state.watch.orphan_suspects = unknown - set(orphans)
    for lease in orphans:
        events.emit(
            events.JOB_ORPHAN_RELEASED,
            logging.WARNING,
            job_id=lease.job_id,
            fencing_token=lease.fencing_token,
            reason="claimed for this worker, never received (a claim's reply was lost)",
        )
        # Before the write: if it lands but its answer is lost, the late claim is still
        # dropped; if it did not land, the job is found again at the next beats.
        state.watch.remember_given_back(lease)
        await _release_now(state, lease, "release-orphan")


async def _release_cancelled_in_queue(state: HeartbeatView, report: HeartbeatReport) -> None:
    """Give back, unrun, the jobs waiting in the local queue whose cancel was requested.

    A job claimed ahead is running in the store while it waits in this worker's
    queue, so a cancel only marks it (cancel phase COOPERATIVE), and the cancel
    controller acts on jobs that have a task. Taken out of the queue before any
    consumer takes it, it is released: the store ends a released job whose cancel
    was requested ``cancelled``. A release that fails leaves the job owned and
    unheld: the orphan release gives it back at the next beats.
    """
    if state.stopping.in_progress:
        return  # the shutdown's drain gives the queue back (cancelled ones end cancelled)
    asked = {view.lease for view in report.running if view.cancel_phase >= CancelPhase.COOPERATIVE}
    if not asked:
        return
    taken = state.local_queue.take_out(lambda job: job.lease in asked)
    if taken and state.claim_room() >= state.claim_threshold:
        state.slot_freed.set()  # room for the producer's next claim, as a consumer leaves
    for job in taken:
        events.emit(
            events.JOB_CANCEL_REQUESTED,
            job_id=job.id,
            actor=job.actor,
            queue=job.queue,
            then="waiting in this worker's queue, never started: given back unrun, it ends "
            "cancelled",
        )
        await _release_now(state, job.lease, "release-cancelled")


async def _release_now(state: HeartbeatView, lease: Lease, write: str) -> None:
    """Release ``lease`` (pending again at once, or cancelled if that was asked), within
    ``heartbeat_command_timeout``: a row another session holds locked must not hold up
    the beat. A failure is logged; the job, owned and unheld, is then found again by the
    orphan release of the next beats."""
    try:
        await with_timeout(
            state.clock,
            state.settings.heartbeat_command_timeout,
            state.store.release(lease, delay=timedelta(0)),
            abandon=True,
        )
    except LeaseLost:
        pass  # it ended, or someone else has it now: nothing to give back
    except (TaskQError, TimeoutError) as exc:
        timed_out = isinstance(exc, TimeoutError) and not isinstance(exc, TaskQError)
        events.emit(
            events.JOB_WRITE_FAILED,
            logging.ERROR,
            job_id=lease.job_id,
            write=write,
            error="no answer within TASKQ_HEARTBEAT_COMMAND_TIMEOUT="
            f"{state.settings.heartbeat_command_timeout:g}s"
            if timed_out
            else str(exc),
        )


def _extend_reservations(state: HeartbeatView) -> None:
    """Start extending this worker's reservation leases (``RateLimiter.extend``).

    It runs in a task of its own, beside the heartbeat call, and no beat waits
    for it: the limiter (Redis) is not the job store, and one that stops
    answering must not delay the beats that keep the jobs' leases. One still
    under way when the next beat comes is left to end, not doubled.
    """
    limiter = state.rate_limiter
    if limiter is None:
        return
    previous = state.watch.reservations_extension
    if previous is not None and not previous.done():
        return
    extension = asyncio.ensure_future(_extend_bounded(state, limiter))
    kept(extension)
    state.watch.reservations_extension = extension


async def _extend_bounded(state: HeartbeatView, limiter: RateLimiter) -> None:
    """One ``extend``, logged once (``heartbeat-failed``, part ``reservations``) when it
    fails or has not answered within ``heartbeat_command_timeout``; not a failed
    heartbeat, the jobs' leases do not depend on it.

    A late answer still extends the reservations (a Redis behind a silent partition
    takes its client's socket timeouts, then the Postgres fallback answers), so the
    call is given up (abandoned, not waited for) only after ``lock_lease``, when the
    reservations it would extend have expired, or at the end of the shutdown.
    """
    settings = state.settings
    clock = state.clock
    work = asyncio.ensure_future(limiter.extend(state.worker_id, lease=state.lease))
    # Its failure is retrieved however this wait ends: a failure after the one log line
    # (the limiter's own timeout, after ours), the shutdown, this task's cancellation.
    # Left unretrieved, each one was logged at exit as "Task exception was never retrieved".
    kept(work)
    stop = state.shutdown_event.future()
    timer = asyncio.ensure_future(clock.sleep(settings.heartbeat_command_timeout))
    try:
        await first_done(work, timer, stop)
        if not work.done() and not stop.done():
            _log_extension_failed(
                state,
                "no answer from the rate limiter within TASKQ_HEARTBEAT_COMMAND_TIMEOUT="
                f"{settings.heartbeat_command_timeout:g}s; a later answer still extends them "
                f"(given up after TASKQ_LOCK_LEASE={settings.lock_lease:g}s)",
            )
            timer.cancel()
            left = settings.lock_lease - settings.heartbeat_command_timeout
            timer = asyncio.ensure_future(clock.sleep(max(left, 0.0)))
            await first_done(work, timer, stop)
            # Cancelled, not waited for: a limiter that does not answer can hang its
            # cancellation too (kept above until it ends).
            work.cancel()
            return
    except BaseException:
        work.cancel()  # this task was cancelled (the loop closing): the call goes with it
        raise
    finally:
        timer.cancel()
    if not work.done():  # the shutdown is complete: nothing is left to extend
        work.cancel()
    elif not work.cancelled() and (exc := work.exception()) is not None:
        _log_extension_failed(state, str(exc) or type(exc).__name__)


def _log_extension_failed(state: HeartbeatView, error: str) -> None:
    events.emit(
        events.HEARTBEAT_FAILED,
        logging.WARNING,
        part="reservations",
        error=error,
        then="the jobs' leases are extended all the same; a reservation not extended "
        "expires TASKQ_LOCK_LEASE after its last extension",
    )


async def _apply_cancel_phases(state: HeartbeatView, report: HeartbeatReport) -> list[ActiveJob]:
    observed = {view.lease.job_id: view.cancel_phase for view in report.running}
    controller, actions = state.watch.cancel_controller.tick(
        observed, state.clock.monotonic(), running=state.active.ids()
    )
    state.watch.cancel_controller = controller
    abandons: list[ActiveJob] = []
    for job_id, action in actions:
        active = state.active.get(job_id)
        if active is None:
            continue
        if isinstance(action, SetCancelEvent):
            active.request_cancel("request")
            events.emit(
                events.JOB_CANCEL_REQUESTED,
                job_id=job_id,
                actor=active.job.actor,
                queue=active.job.queue,
            )
        elif isinstance(action, PersistForced):
            try:
                # Bounded: an unanswered write here would hold the heartbeat loop itself.
                await state.write_bounds.command(state.store.escalate_cancel(active.job.lease))
            except TaskQError as exc:
                events.emit(
                    events.JOB_WRITE_FAILED,
                    logging.WARNING,
                    job_id=job_id,
                    write="escalate",
                    error=str(exc),
                )
        elif isinstance(action, CancelTask):
            active.force_cancel("request")
            events.emit(events.JOB_CANCEL_FORCED, logging.WARNING, job_id=job_id)
        elif isinstance(action, QueueAbandon):
            active.abandon_queued = True
            abandons.append(active)
    return abandons


def _flag_lost_leases(
    state: HeartbeatView, report: HeartbeatReport, watched: dict[int, ActiveJob]
) -> None:
    # Only jobs already running before the beat: a job claimed during it is
    # missing from the report for no bad reason.
    owned = {view.lease for view in report.running}
    for job_id, active in watched.items():
        if (
            active.job.lease in owned
            or job_id not in state.active
            or active.finishing
            or active.abandon_queued
            or active.cancel_reason == "lease_lost"
        ):
            continue
        events.emit(
            events.JOB_LEASE_LOST,
            logging.WARNING,
            job_id=job_id,
            fencing_token=active.job.fencing_token,
            write="heartbeat",
        )
        active.request_cancel("lease_lost")


async def _abandon(state: HeartbeatView, active: ActiveJob) -> None:
    job = active.job
    try:
        await state.write_bounds.command(
            asyncio.shield(
                state.store.finish(
                    Finish(lease=job.lease, status=JobStatus.ABANDONED, error=_ABANDON_MESSAGE)
                )
            ),
        )
    except LeaseLost:
        pass  # it finished (or was reclaimed) meanwhile: nothing to abandon
    except TaskQError as exc:
        events.emit(
            events.JOB_WRITE_FAILED, logging.ERROR, job_id=job.id, write="abandon", error=str(exc)
        )
    else:
        events.emit(events.JOB_ABANDONED, logging.ERROR, **job_fields(active))
    # Its consumer stops waiting for code that ignored both the request and its task's
    # cancellation: the slot serves the next job (a failed write leaves the job to the
    # heartbeat's orphan release, which ends it cancelled: its cancel was requested).
    settled = active.settled
    if settled is not None and not settled.done():
        settled.set_result(None)


async def isolate_self(state: HeartbeatView, failures: int) -> None:
    """Hand this worker's jobs back, stop its tasks, and shut the worker down."""
    affected = await hand_back(
        state,
        error_class=HEARTBEAT_LOST,
        error=None,
        budget=state.settings.heartbeat_command_timeout,
    )
    events.emit(
        events.WORKER_ISOLATED,
        logging.ERROR,
        consecutive_failures=failures,
        jobs=affected,
        note="jobs were handed back"
        if affected is not None
        else "isolate write failed; the leader's sweep reclaims the jobs when their leases expire",
    )
    state.producer_stop.set()
    for active in state.active:
        active.force_cancel("lease_lost")
    state.stopping.set_exit_code(ExitCode.ERROR)
    state.shutdown_event.set()
