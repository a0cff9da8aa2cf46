"""Handing back every job a worker still owns when it lets go of them without its consumers.

Isolate-self (the database is unreachable), a third signal (leave now), a
watchdog trip and a worker that stops after a crash of its own cannot wait for
each job to end and write its outcome. One ``isolate_worker`` write hands them
all back by the one rule for interruptions (``store_params.Isolation``): a job
that never started waits again with its attempt kept; a started job of a
retryable actor waits again with its attempt refunded (an interruption is not
its failure); a started non-retryable job ends crashed (it never runs twice).

Jobs that go back to waiting are due ``HANDBACK_RETRY_DELAY`` later: their code
may still be running in this process for a moment (a thread that ignores
cancellation), and another worker should not start them alongside it.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Final

from taskq.app.worker import events
from taskq.app.worker.attempt_log import job_fields
from taskq.app.worker.exit_guard import EXIT_GRACE
from taskq.app.worker.state import ActiveJob
from taskq.app.worker.task_views import HandBackView, WorkerBasics
from taskq.app.worker.waiting import with_timeout
from taskq.domain.errors import TaskQError
from taskq.ports.store_params import Isolation

#: When jobs handed back become due again.
HANDBACK_RETRY_DELAY: Final = timedelta(seconds=5)
#: Most seconds a worker that leaves at once (a third signal, a watchdog trip) gives its
#: hand-back write; past it the jobs are left to their leases and the leader's sweep.
LEAVING_BUDGET: Final = 1.0


def until_this_process_ends(state: WorkerBasics) -> timedelta:
    """How long until this process has surely ended: the rest of its termination grace
    (the watchdog ends it by then) plus the exit guard's grace. A job whose code may
    still run here (a sync actor's thread, a task that swallows its cancellation) is
    due again no sooner, so no other worker starts it alongside."""
    left = state.settings.termination_grace_period
    if state.stopping.started_at is not None:
        left -= state.clock.monotonic() - state.stopping.started_at
    return timedelta(seconds=max(left, 0.0) + EXIT_GRACE)


async def hand_back(
    state: HandBackView, *, error_class: str, error: str | None, budget: float
) -> list[int] | None:
    """Hand back every running job of this worker; the affected ids, None when the
    write failed or did not answer within ``budget`` seconds (the leader's sweep then
    reclaims the jobs when their leases expire)."""
    retryable = sorted(
        name for name, ref in state.registry.items() if ref.retry.kind != "non_retryable"
    )
    request = Isolation(
        worker_id=state.worker_id,
        retryable_actors=retryable,
        retry_at=state.clock.now() + HANDBACK_RETRY_DELAY,
        error_class=error_class,
        error=error,
    )
    held = list(state.active)  # what this process knows of each job, before the write
    try:
        # Abandoned on timeout: a blackholed connection can hang the cancellation too.
        handed: list[int] | None = await with_timeout(
            state.clock, budget, state.store.isolate_worker(request), abandon=True
        )
    except (TaskQError, TimeoutError, OSError):
        handed = None
    _log_each(held, handed, error_class)
    return handed


def _log_each(held: list[ActiveJob], handed: list[int] | None, why: str) -> None:
    """One line per job the worker lets go of, naming it: handed back, or (the write did
    not land) left to its lease and the leader's sweep."""
    known = {active.job.id: active for active in held}
    if handed is None:
        for active in held:
            events.emit(
                events.JOB_LEFT_TO_LEASE,
                logging.WARNING,
                **job_fields(active),
                reason=why,
                then="the hand-back did not land: the leader takes it back when its lease ends",
            )
        return
    for job_id in handed:
        mine = known.get(job_id)  # None: claimed but never taken by a consumer
        fields = job_fields(mine) if mine is not None else {"job_id": job_id}
        retryable = mine is None or mine.ref.retry.kind != "non_retryable"
        events.emit(
            events.JOB_HANDED_BACK,
            logging.INFO if retryable else logging.WARNING,
            **fields,
            reason=why,
            then=f"waits again in {HANDBACK_RETRY_DELAY.total_seconds():g}s; the attempt is "
            "not counted"
            if retryable
            else "crashed if it had started (a non_retryable job never runs twice); "
            "else waits again",
        )


__all__ = ["HANDBACK_RETRY_DELAY", "LEAVING_BUDGET", "hand_back", "until_this_process_ends"]
