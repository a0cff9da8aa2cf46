"""Until-idle: exit once this worker's queues have drained (or a runtime cap passed).

Every ``idle_poll_interval`` the drain monitor counts active jobs (pending,
scheduled, running) on the worker's queues. Once the count has read zero
for ``idle_settle_window`` (0: the first zero), it records the exit code
and asks for the normal graceful shutdown:

- 0: drained and no job this worker ran ended ``failed``;
- 3: drained, but this worker's consumers failed at least one job
  (``drain_failures``; failures written elsewhere are not seen);
- 4: ``idle_max_runtime`` passed first (the shutdown then drains, cancels
  and abandons whatever still runs, as for SIGTERM).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from taskq.app.worker import events
from taskq.app.worker.exit_codes import ExitCode
from taskq.app.worker.state import WorkerState
from taskq.domain.errors import TaskQError


async def run_until_idle(
    state: WorkerState, *, max_runtime: float | None, request_shutdown: Callable[[str], None]
) -> None:
    """The drain monitor; returns with the shutdown event."""
    clock, settings = state.clock, state.settings
    poll, settle = settings.idle_poll_interval, settings.idle_settle_window
    started = clock.monotonic()
    idle_since: float | None = None
    while not state.shutdown_in_progress:
        state.liveness.tick("until_idle", poll)
        now = clock.monotonic()
        if max_runtime is not None and now - started >= max_runtime:
            state.set_exit_code(ExitCode.UNTIL_IDLE_MAX_RUNTIME)
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
        if (
            active == 0
            and not len(state.active)
            and state.local_queue.empty()
            and not state.writes_in_flight  # a failure is counted once its write lands
        ):
            idle_since = now if idle_since is None else idle_since
            if now - idle_since >= settle:
                code = ExitCode.UNTIL_IDLE_FAILURES if state.drain_failures else ExitCode.OK
                state.set_exit_code(code)
                events.emit(
                    events.UNTIL_IDLE_DRAINED,
                    drain_failures=state.drain_failures,
                    exit_code=int(code),
                )
                request_shutdown("until-idle drained")
                break
        else:
            idle_since = None
        wait = poll
        if idle_since is not None:
            wait = min(wait, max(settle - (now - idle_since), 0.0)) or poll
        if max_runtime is not None:
            wait = min(wait, max(max_runtime - (now - started), 0.0))
        await clock.sleep(wait)
    state.liveness.forget("until_idle")
    await state.shutdown_event.wait()
