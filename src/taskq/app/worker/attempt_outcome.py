"""How an attempt ended, read from its task and from why (and whether) it was asked to stop.

The rules the consumer's docstring lists, as functions of an ``ActiveJob``: a user's
cancel ends ``cancelled``, the worker's own stop interrupts, a timeout or deadline
fails the attempt, and an actor that finished without looking ends as it ended.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from taskq.app.worker import attempt_span
from taskq.app.worker.state import ActiveJob
from taskq.app.worker.timeouts import TIMED_OUT_REASONS, timed_out
from taskq.domain.errors import PayloadValidationError
from taskq.domain.outcomes import (
    CancelledByRequest,
    Interrupted,
    Outcome,
    Raised,
    RetryAfter,
    Snooze,
    Succeeded,
    outcome_from_exception,
)

#: Error class recorded on an attempt interrupted by the worker's own shutdown.
WORKER_SHUTDOWN: Final = "WorkerShutdown"
#: Error class recorded on an attempt stopped because the worker lost the job's lease.
LEASE_LOST: Final = "LeaseLost"


def outcome_of(active: ActiveJob, task: asyncio.Task[Any]) -> Outcome:
    """How the attempt ended, given why (and whether) it was asked to stop."""
    reason = active.cancel_reason
    if active.actor_ended is not None:
        # The actor had ended: a cancel during its teardown cannot change that.
        if task.done() and not task.cancelled():
            task.exception()  # retrieved here, or asyncio logs it as never retrieved
        value, exc, reason = active.actor_ended
    elif task.cancelled():
        if reason is None:
            # Nobody asked: the actor's code raised CancelledError itself (a library that
            # leaks one). An error of the attempt, retried as its policy says, not a cancel.
            return Raised(
                "CancelledError", "the actor raised CancelledError; no cancel was requested"
            )
        if reason == "request":
            return CancelledByRequest()
        if reason in TIMED_OUT_REASONS:
            return timed_out(active)
        return _interrupted(active)
    else:
        exc = task.exception()
        value = task.result() if exc is None else None
    if exc is None:
        if reason is not None and active.cancel_event.observed:
            # A cooperative early return: the actor saw the request and stopped.
            if reason in TIMED_OUT_REASONS:
                return timed_out(active)
            return CancelledByRequest() if reason == "request" else _interrupted(active)
        try:
            # Finished without looking at the request: the work is done.
            return Succeeded(active.ref.dump_result(value))
        except Exception as dump_error:
            # The same result will not serialise next time either.
            return Raised.from_exception(dump_error, retryable=False)
    if reason == "request":
        return CancelledByRequest()
    if reason is not None and active.cancel_event.observed:
        if reason in TIMED_OUT_REASONS:
            return timed_out(active, raised=exc)  # it raised to stop at its bound
        return _interrupted(active)  # it raised to stop, as the worker asked
    if isinstance(exc, Snooze | RetryAfter):
        return outcome_from_exception(exc)
    if isinstance(exc, ActorBaseException):
        return Raised.from_exception(exc.original)
    retryable = not isinstance(exc, PayloadValidationError)
    return Raised.from_exception(exc, retryable=retryable)


def unconcluded_outcome(active: ActiveJob) -> str:
    """How an attempt that ended with no outcome of the consumer's own ended: abandoned
    (its abandonment owns the write), not started (its start mark lost the lease), or
    interrupted (the worker stopped waiting for it)."""
    if active.abandon_queued:
        return attempt_span.ABANDONED
    if active.task is None and not active.stop_waiting:
        return attempt_span.NOT_STARTED
    return attempt_span.INTERRUPTED


def end_unconcluded(active: ActiveJob, ended_as: str) -> None:
    """End the span of an attempt that ended with no outcome of the consumer's own."""
    assert active.span is not None
    if ended_as == attempt_span.ABANDONED:
        attempt_span.end_unfinished(active.span, ended_as, error_type="Abandoned")
    elif ended_as == attempt_span.NOT_STARTED:
        attempt_span.end_unfinished(active.span, ended_as)
    else:
        attempt_span.end_unfinished(active.span, ended_as, error_type=WORKER_SHUTDOWN)


def _interrupted(active: ActiveJob) -> Interrupted:
    """The worker's own reason for stopping the attempt, said as it happened."""
    if active.cancel_reason == "lease_lost":
        return Interrupted(
            LEASE_LOST, "the worker lost the job's lease (isolated, or the lease was reclaimed)"
        )
    how = (
        "still running after the cancellation grace, its task was cancelled"
        if active.forced
        else "the actor stopped when its cancel_event was set"
    )
    return Interrupted(WORKER_SHUTDOWN, f"interrupted by the worker's shutdown: {how}")


class ActorBaseException(Exception):
    """Carries a BaseException the actor raised (SystemExit, ...) out of its task as an
    ordinary error of the job."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"{type(original).__name__}: {original!r}")
        self.original = original


__all__ = [
    "LEASE_LOST",
    "WORKER_SHUTDOWN",
    "ActorBaseException",
    "end_unconcluded",
    "outcome_of",
    "unconcluded_outcome",
]
