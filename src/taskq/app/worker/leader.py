"""The maintenance leader: election, then the leader's sub-loops while it holds the lock.

Every ``heartbeat_interval`` a non-leader tries ``LeaderLock.try_acquire``.
The winner runs, until it loses the lock, the shutdown releases it, or the
worker stops::

    probe            every 5 s    LeaderLock.probe(); False → lost, lock released
    promote          every 1 s    scheduled → pending, then one wake-up publish
    reclaim          at each      reclaim_expired as the earliest running lease
                     expiry       expires (looked up at least every 1 s), then
                                  one wake-up publish when a job was re-pended
    sweep            every 30 s   fail_past_deadline, cleanup_stale_workers,
                                  expire_results, rate limiter sweep_expired
    queue-depth      every 15 s   queue_depths() sample → the queue gauges (metrics)
    stranded         every 60 s   stranded_actors() → warning (the first 5 s after election)
    prune            daily        TASKQ_PRUNE_SCHEDULE_UTC (or _CRON_EXPR)
    archive-expiry   daily        TASKQ_ARCHIVE_EXPIRY_SCHEDULE_UTC (or _CRON_EXPR)
    cron             each tick    the registry's @cron schedules, one job per tick
                                  (taskq.app.scheduling.loop; only when there are any)

Interval loops run once at election (a new leader sweeps what the previous
one left), then at their cadence; the stranded check runs first 5 s after
election, so workers starting with the leader have registered (it reads
which live workers register which actors). A failing step is logged
(``leader-task-failed``) and retried next time; it never ends leadership.

The reclaim loop asks the store how long the earliest lease of a running job
has left (``time_to_lease_expiry``: on the store's clock, so the leader's
clock never meets the leases) and sleeps that long, but never longer than
``LEASE_CHECK_INTERVAL``: another worker may claim a job with a shorter lease
meanwhile. So a dead worker's jobs are pending again within a few
milliseconds of their lease's end (its last heartbeat plus ``lock_lease``),
and at most ``LEASE_CHECK_INTERVAL`` after it whatever the leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Final

from taskq.app.scheduling.loop import cron_entries, run_cron
from taskq.app.scheduling.schedule import CronSchedule
from taskq.app.worker import events
from taskq.app.worker import stranded as stranded_jobs
from taskq.app.worker.schedule import Schedule, daily_schedule
from taskq.app.worker.task_views import LeaderView
from taskq.app.worker.waiting import until_stopped, wait_event, with_timeout
from taskq.domain.errors import TaskQError
from taskq.domain.job import EnqueueResult
from taskq.domain.status import TERMINAL
from taskq.ports.store_params import PrunePolicy, ReclaimReport

PROBE_INTERVAL: Final = 5.0
PROMOTE_INTERVAL: Final = 1.0
SWEEP_INTERVAL: Final = 30.0
#: Longest the reclaim loop goes without looking at the running leases.
LEASE_CHECK_INTERVAL: Final = 1.0
#: Slept past a lease's end: reclaim_expired takes a lock that expired *before* now.
EXPIRY_MARGIN: Final = 0.001
#: Least time between two reclaims that both found work (an expired lease left
#: behind, its row locked by another transaction, is retried after LEASE_CHECK_INTERVAL).
RECLAIM_SPACING: Final = 0.1
QUEUE_DEPTH_INTERVAL: Final = 15.0
STRANDED_INTERVAL: Final = 60.0
#: The first stranded check after election: soon (within 10 s), yet late enough for workers
#: started with the leader to have registered.
STRANDED_FIRST_DELAY: Final = 5.0

Step = Callable[[LeaderView], Awaitable[None]]


async def run_leader(state: LeaderView) -> None:
    """Compete for leadership until the shutdown event."""
    lock = state.leader_lock
    interval = state.settings.heartbeat_interval
    try:
        while not state.shutdown_event.is_set():
            if state.leadership.released.is_set():
                # The shutdown released the lock: never lead again in this process.
                state.liveness.forget("leader.election")
                await state.shutdown_event.wait()
                break
            state.liveness.tick("leader.election", interval)
            if await _try_acquire(state):
                await _lead(state)
            await wait_event(state.clock, interval, state.shutdown_event, state.leadership.released)
    finally:
        state.leadership.is_leader = False
        state.liveness.forget("leader.election")
        if lock.held:
            await _release(state)


async def _try_acquire(state: LeaderView) -> bool:
    # Given up soon after the shutdown: a worker leaving must not wait out an election
    # on a dead network (a lock taken meanwhile goes with the session at close).
    try:
        return await until_stopped(
            state.clock,
            state.leader_lock.try_acquire(),
            state.shutdown_event,
            state.settings.heartbeat_command_timeout,
        )
    except TimeoutError:
        return False
    except TaskQError as exc:
        events.emit(events.LEADER_TASK_FAILED, logging.WARNING, task="election", error=str(exc))
        return False


async def _release(state: LeaderView) -> None:
    # Bounded: on a dead network the unlock would wait out the lock's own timeouts,
    # and the session's end (closing the port) releases the lock anyway.
    try:
        await with_timeout(
            state.clock,
            state.settings.heartbeat_command_timeout,
            state.leader_lock.release(),
            abandon=True,
        )
    except (TaskQError, TimeoutError) as exc:
        events.emit(events.LEADER_TASK_FAILED, logging.WARNING, task="release", error=str(exc))


async def _lead(state: LeaderView) -> None:
    state.leadership.is_leader = True
    state.liveness.forget("leader.election")  # parked while leading; the sub-loops tick
    events.emit(events.LEADER_ELECTED, worker_id=state.worker_id)
    settings = state.settings
    lost = asyncio.Event()
    loops = {
        "leader.probe": _probe_loop(state, lost),
        "leader.promote": _every(state, "leader.promote", PROMOTE_INTERVAL, promote),
        "leader.reclaim": _reclaim_loop(state),
        "leader.sweep": _every(state, "leader.sweep", SWEEP_INTERVAL, sweep),
        "leader.queue_depth": _every(
            state, "leader.queue_depth", QUEUE_DEPTH_INTERVAL, sample_queue_depth
        ),
        "leader.stranded": _every(
            state, "leader.stranded", STRANDED_INTERVAL, stranded, first_after=STRANDED_FIRST_DELAY
        ),
        "leader.prune": _daily(
            state,
            "prune",
            daily_schedule(settings.prune_cron_expr, settings.prune_schedule_utc),
            prune,
        ),
        "leader.archive_expiry": _daily(
            state,
            "archive_expiry",
            daily_schedule(settings.archive_expiry_cron_expr, settings.archive_expiry_schedule_utc),
            expire_archive,
        ),
    }
    if cron_entries(state.registry):
        loops["leader.cron"] = cron_loop(state)
    tasks = [asyncio.create_task(loop, name=f"taskq-{name}") for name, loop in loops.items()]
    try:
        await wait_event(state.clock, None, state.shutdown_event, state.leadership.released, lost)
    finally:
        for task in tasks:
            task.cancel()
        # Not waited for past the command timeout: a driver's cancellation of a
        # statement on a dead network can take many seconds (psycopg: up to 10).
        with contextlib.suppress(TimeoutError):
            await with_timeout(
                state.clock,
                settings.heartbeat_command_timeout,
                asyncio.gather(*tasks, return_exceptions=True),
                abandon=True,
            )
        state.leadership.is_leader = False
        state.metrics.queue_depths_cleared()  # only the leader reports queue depths
        for name in loops:
            state.liveness.forget(name)
    if lost.is_set():
        events.emit(events.LEADER_LOST, logging.WARNING, worker_id=state.worker_id)
    await _release(state)
    if state.leadership.released.is_set():
        events.emit(events.LEADER_RELEASED, worker_id=state.worker_id)


async def _probe_loop(state: LeaderView, lost: asyncio.Event) -> None:
    while True:
        await state.clock.sleep(PROBE_INTERVAL)
        state.liveness.tick("leader.probe", PROBE_INTERVAL)
        try:
            held = await state.leader_lock.probe()
        except TaskQError:
            held = False
        if not held:
            lost.set()
            return


async def _every(
    state: LeaderView, name: str, period: float, step: Step, *, first_after: float = 0.0
) -> None:
    if first_after > 0:
        state.liveness.tick(name, first_after)
        await state.clock.sleep(first_after)
    while True:
        state.liveness.tick(name, period)
        await _run_step(state, name, step)
        await state.clock.sleep(period)


async def _reclaim_loop(state: LeaderView) -> None:
    """Reclaim expired leases as they expire (see the module docstring)."""
    name = "leader.reclaim"
    clock = state.clock
    not_before = clock.monotonic()  # no reclaim before this (monotonic seconds)
    while True:
        state.liveness.tick(name, LEASE_CHECK_INTERVAL)
        wait = await _time_to_lease_expiry(state, name)
        now = clock.monotonic()
        if wait is not None and wait < 0 and now >= not_before:
            found = await _reclaim_step(state, name)
            not_before = clock.monotonic() + (RECLAIM_SPACING if found else LEASE_CHECK_INTERVAL)
            continue
        if wait is None:
            pause = LEASE_CHECK_INTERVAL
        elif wait < 0:
            pause = not_before - now
        else:
            pause = min(wait + EXPIRY_MARGIN, LEASE_CHECK_INTERVAL)
        await clock.sleep(pause)


async def _time_to_lease_expiry(state: LeaderView, name: str) -> float | None:
    """Seconds until the earliest running lease expires; None if none runs or the read failed."""
    try:
        wait = await state.store.time_to_lease_expiry()
    except Exception as exc:
        _step_failed(name, exc)
        return None
    return None if wait is None else wait.total_seconds()


async def _reclaim_step(state: LeaderView, name: str) -> bool:
    """One ``reclaim``; whether it moved any job (False when it failed)."""
    try:
        report = await reclaim(state)
    except Exception as exc:
        _step_failed(name, exc)
        return False
    return bool(report.repended or report.crashed or report.cancelled)


async def _daily(state: LeaderView, name: str, schedule: Schedule, step: Step) -> None:
    while True:
        now = state.clock.now()
        await state.clock.sleep((schedule.next_after(now) - now).total_seconds())
        await _run_step(state, name, step)


async def cron_loop(state: LeaderView) -> None:
    """The registry's ``@cron`` schedules (see :mod:`taskq.app.scheduling.loop`)."""

    def enqueued(schedule: CronSchedule, tick: datetime, result: EnqueueResult) -> None:
        events.emit(
            events.CRON_ENQUEUED,
            logging.INFO if not result.was_existing else logging.DEBUG,
            actor=schedule.actor,
            cron=schedule.expression.expr,
            tz=schedule.expression.tz,
            tick=tick.isoformat(),
            job_id=str(result.job_id),
            was_existing=result.was_existing,
        )

    def failed(schedule: CronSchedule, tick: datetime, exc: Exception) -> None:
        _step_failed(f"cron.{schedule.actor}", exc)

    await run_cron(
        state.store,
        state.clock,
        cron_entries(state.registry),
        on_enqueued=enqueued,
        on_failed=failed,
    )


async def _run_step(state: LeaderView, name: str, step: Step) -> None:
    try:
        await step(state)
    except Exception as exc:
        _step_failed(name, exc)


def _step_failed(name: str, exc: Exception) -> None:
    events.emit(
        events.LEADER_TASK_FAILED,
        logging.ERROR,
        exc_info=not isinstance(exc, TaskQError),
        task=name,
        error=str(exc),
    )


# -- the steps -------------------------------------------------------------------------


async def _publish_wake(state: LeaderView) -> None:
    state.wake.set()  # this worker's own producer, even without a notifier
    notifier = state.notifier
    if notifier is not None and state.settings.notify_enabled:
        await notifier.publish("")


#: What became of a reclaimed job, by the report's list it is in.
_RECLAIMED_THEN: Final = {
    "repended": "waits again; the attempt counts (its worker died or went silent while it ran)",
    "unstarted": "waits again; its worker never started it, so the attempt is kept",
    "crashed": "crashed: its attempts are used up",
    "cancelled": "cancelled: a cancel had been requested",
}


def _log_each_reclaimed(report: ReclaimReport) -> None:
    """One ``job-reclaimed`` line per job, beside the summary: a job's own history in the
    logs (grep its id) then says where it went."""
    unstarted = set(report.unstarted)
    for kind, ids in (
        ("repended", report.repended),
        ("crashed", report.crashed),
        ("cancelled", report.cancelled),
    ):
        for job_id in ids:
            became = "unstarted" if kind == "repended" and job_id in unstarted else kind
            events.emit(
                events.JOB_RECLAIMED,
                logging.WARNING,
                job_id=job_id,
                outcome=kind,
                started=job_id not in unstarted,
                then=_RECLAIMED_THEN[became],
            )


async def promote(state: LeaderView) -> None:
    """Scheduled jobs that are due become pending; one wake-up when any did."""
    if await state.store.promote_scheduled():
        await _publish_wake(state)


async def reclaim(state: LeaderView) -> ReclaimReport:
    """Expired leases: their jobs wait again (or end); one wake-up when any was re-pended."""
    report = await state.store.reclaim_expired()
    if report.repended or report.crashed or report.cancelled:
        events.emit(
            events.LEASES_RECLAIMED,
            logging.WARNING,
            repended=list(report.repended),
            crashed=list(report.crashed),
            cancelled=list(report.cancelled),
            # The dead worker never started these: their attempt is kept.
            unstarted=list(report.unstarted),
        )
        _log_each_reclaimed(report)
    if report.repended:
        await _publish_wake(state)
    return report


async def sweep(state: LeaderView) -> None:
    """The 30 s sweeps, each on its own so one failure does not skip the others."""
    store = state.store
    failures: list[str] = []

    async def attempt(name: str, work: Callable[[], Awaitable[None]]) -> None:
        try:
            await work()
        except Exception as exc:
            failures.append(f"{name}: {exc}")
            events.emit(
                events.LEADER_TASK_FAILED,
                logging.ERROR,
                exc_info=not isinstance(exc, TaskQError),
                task=f"sweep.{name}",
                error=str(exc),
            )

    async def deadlines() -> None:
        failed = await store.fail_past_deadline()
        if failed:
            events.emit(events.DEADLINES_FAILED, logging.WARNING, job_ids=failed)

    async def stale_workers() -> None:
        stale_after = timedelta(seconds=2 * state.settings.lock_lease)
        removed = await store.cleanup_stale_workers(stale_after=stale_after)
        if removed:
            events.emit(events.STALE_WORKERS_REMOVED, worker_ids=removed)

    async def results() -> None:
        await store.expire_results()

    async def reservations() -> None:
        if state.rate_limiter is not None:
            await state.rate_limiter.sweep_expired()

    await attempt("fail_past_deadline", deadlines)
    await attempt("cleanup_stale_workers", stale_workers)
    await attempt("expire_results", results)
    await attempt("rate_limiter", reservations)


async def sample_queue_depth(state: LeaderView) -> None:
    depths = await state.store.queue_depths()
    state.metrics.queue_depths_sampled(depths)
    by_queue: dict[str, dict[str, int]] = {}
    for depth in depths:
        by_queue.setdefault(depth.queue, {})[depth.status.value] = depth.count
    events.emit(events.QUEUE_DEPTH, logging.DEBUG, queues=by_queue)


async def stranded(state: LeaderView) -> None:
    """Warn about waiting jobs no live worker can claim, naming actor, queue, count and why."""
    found = await state.store.stranded_actors(stale_after=stranded_jobs.live_within(state.settings))
    if found:
        totals: dict[str, int] = {}
        for entry in found:
            totals[entry.actor] = totals.get(entry.actor, 0) + entry.waiting
        events.emit(
            events.STRANDED_ACTORS,
            logging.WARNING,
            actors=totals,
            queues=sorted({entry.queue for entry in found}),
            stranded=stranded_jobs.as_fields(found),
            note=stranded_jobs.NOTE,
        )


async def prune(state: LeaderView) -> None:
    settings = state.settings
    archived = await state.store.prune(
        PrunePolicy(
            retention={status: settings.prune_retention_for(status.value) for status in TERMINAL},
            archive_retention=settings.archive_retention_period,
            batch_size=settings.prune_batch_size,
        )
    )
    events.emit(events.PRUNE_COMPLETED, archived=archived)


async def expire_archive(state: LeaderView) -> None:
    deleted = await state.store.expire_archive()
    events.emit(events.ARCHIVE_EXPIRY_COMPLETED, deleted=deleted)
