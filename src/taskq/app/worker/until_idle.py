"""Until-idle: exit once this worker's queues have drained, hold only jobs nobody can run,
or a runtime cap passed.

Every ``idle_poll_interval`` the drain monitor counts active jobs (pending,
scheduled, running) on the worker's queues. It records the exit code and asks
for the normal graceful shutdown once one of these has held for
``idle_settle_window`` (0: at the first poll that sees it):

- 0: the count reads zero, nothing of this worker's is in flight, and no job
  this worker ran ended ``failed``;
- 3: drained, but this worker's consumers failed at least one job
  (``drain_failures``; failures written elsewhere are not seen);
- 5: stranded: nothing of this worker's is in flight and every active job left
  is a waiting job that no live worker can claim (``stranded_actors`` on the
  worker's queues: no worker seen within ``lock_lease`` registers its actor
  and consumes its queue) and whose actor this worker does not register. The
  ``until-idle-stranded`` event and the one-line exit reason name each actor,
  queue, count and why. A running job, or a waiting one some live worker
  (this one included) can claim, keeps the worker waiting;
- 4: ``idle_max_runtime`` passed first (the shutdown then drains, cancels
  and abandons whatever still runs, as for SIGTERM).

The stranded read runs only while the count is not zero and this worker has
nothing in flight, so a busy drain never pays for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from taskq.app.worker import events, stranded
from taskq.app.worker.exit_codes import ExitCode
from taskq.app.worker.task_views import UntilIdleView
from taskq.domain.errors import TaskQError
from taskq.ports.store_params import StrandedJobs


async def run_until_idle(
    state: UntilIdleView, *, max_runtime: float | None, request_shutdown: Callable[[str], None]
) -> None:
    """The drain monitor; returns with the shutdown event."""
    clock, settings = state.clock, state.settings
    poll, settle = settings.idle_poll_interval, settings.idle_settle_window
    started = clock.monotonic()
    idle_since: float | None = None
    stuck_since: float | None = None
    while not state.stopping.in_progress:
        state.liveness.tick("until_idle", poll)
        now = clock.monotonic()
        if max_runtime is not None and now - started >= max_runtime:
            state.stopping.set_exit_code(ExitCode.UNTIL_IDLE_MAX_RUNTIME)
            events.emit(
                events.UNTIL_IDLE_MAX_RUNTIME,
                logging.WARNING,
                idle_max_runtime=max_runtime,
                active_jobs=len(state.active),
            )
            request_shutdown("until-idle max runtime")
            break
        try:
            active = await state.store.count_active(state.queues)
        except TaskQError as exc:
            events.emit(events.UNTIL_IDLE_POLL_FAILED, logging.WARNING, error=str(exc))
            active = -1  # unknown: not idle
        quiet = (
            not len(state.active)
            and state.local_queue.empty()
            and not state.ledger.writes_in_flight  # a failure is counted once its write lands
        )
        if active == 0 and quiet:
            stuck_since = None
            idle_since = now if idle_since is None else idle_since
            if now - idle_since >= settle:
                code = ExitCode.UNTIL_IDLE_FAILURES if state.ledger.drain_failures else ExitCode.OK
                state.stopping.set_exit_code(code)
                events.emit(
                    events.UNTIL_IDLE_DRAINED,
                    drain_failures=state.ledger.drain_failures,
                    exit_code=int(code),
                )
                request_shutdown("until-idle drained")
                break
        else:
            idle_since = None
            stuck = await _unrunnable(state, active) if active > 0 and quiet else []
            if not stuck:
                stuck_since = None
            else:
                stuck_since = now if stuck_since is None else stuck_since
                if now - stuck_since >= settle:
                    _stop_stranded(state, stuck)
                    request_shutdown("until-idle stranded")
                    break
        wait = poll
        since = idle_since if idle_since is not None else stuck_since
        if since is not None:
            wait = min(wait, max(settle - (now - since), 0.0)) or poll
        if max_runtime is not None:
            wait = min(wait, max(max_runtime - (now - started), 0.0))
        await clock.sleep(wait)
    state.liveness.forget("until_idle")
    await state.shutdown_event.wait()


async def _unrunnable(state: UntilIdleView, active: int) -> list[StrandedJobs]:
    """The stranded jobs on this worker's queues when they are all of the ``active`` ones
    (and this worker registers none of their actors), else []."""
    try:
        found = await state.store.stranded_actors(
            state.queues, stale_after=stranded.live_within(state.settings)
        )
    except TaskQError as exc:
        events.emit(events.UNTIL_IDLE_POLL_FAILED, logging.WARNING, error=str(exc))
        return []
    # This worker consumes these queues: one of its own actors' jobs is never stuck here,
    # whatever its workers row says (a row the stale-worker sweep removed, say).
    found = [entry for entry in found if entry.actor not in state.registry]
    if sum(entry.waiting for entry in found) < active:
        return []
    return found


def _stop_stranded(state: UntilIdleView, stuck: list[StrandedJobs]) -> None:
    waiting = sum(entry.waiting for entry in stuck)
    state.stopping.set_exit_code(ExitCode.UNTIL_IDLE_STRANDED)
    state.stopping.note_problem(
        f"until-idle stopped (exit {int(ExitCode.UNTIL_IDLE_STRANDED)}): the {waiting} "
        f"job(s) left on its queues can run on no live worker: {stranded.summary(stuck)}"
    )
    events.emit(
        events.UNTIL_IDLE_STRANDED,
        logging.ERROR,
        stranded=stranded.as_fields(stuck),
        drain_failures=state.ledger.drain_failures,
        exit_code=int(ExitCode.UNTIL_IDLE_STRANDED),
        note=stranded.NOTE,
    )
