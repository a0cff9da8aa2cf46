"""How long one attempt may run, and how it is stopped when it runs longer.

An attempt is bounded by the job's ``attempt_timeout`` (stored by its enqueue)
or else its actor's ``timeout``, counted from the moment the actor is invoked,
and by the job's ``schedule_to_close`` deadline; whichever comes first is the
attempt's :class:`AttemptBound`. A job with neither has no bound: nothing is
armed for it. Expiry goes through the cancel protocol, each step only while
the attempt still runs::

                  bound reached             cooperative grace           cleanup grace
    invoked ─────────────────────▶ TOLD ─────────────────────▶ FORCED ──────────────────▶ ABANDONED
                  cancel_event set           task.cancel() (a sync      the worker stops
                  (ctx.cancelled)            actor's thread cannot be)  waiting; outcome written

The graces (:func:`graces_for`) are the worker's ``cancellation_grace_period``
and ``cleanup_grace_period``, each capped at the timeout: a 5 s timeout is
told at 5 s, cancelled by 10 s and given up on by 15 s, however long the
worker's graces are. A deadline without a timeout uses the worker's graces.

However it ends after the expiry (stopped on the event, cancelled, given up
on), the attempt fails with :data:`ATTEMPT_TIMEOUT` (or ``DeadlineExceeded``
for the deadline) and the job's retry policy decides what follows, as for any
error; an actor that returns without having looked at the event keeps its
result.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from taskq.domain.cancel import GracePeriods
from taskq.domain.errors import AttemptTimeout, DeadlineExceeded

#: Error class of an attempt stopped at its timeout.
ATTEMPT_TIMEOUT: Final = AttemptTimeout.__name__
#: Error class of an attempt stopped at its job's schedule_to_close deadline.
DEADLINE_EXCEEDED: Final = DeadlineExceeded.__name__

#: What stopped the attempt: its timeout, or its job's deadline.
BoundKind = Literal["timeout", "deadline"]


@dataclass(frozen=True, slots=True)
class AttemptBound:
    """When a running attempt is told to stop, and the graces that follow.

    ``after`` is the time from the invocation to the expiry in seconds (0 when
    the deadline has already passed); ``cooperative`` and ``cleanup`` the graces
    in seconds; ``timeout`` the attempt timeout, ``deadline`` the job's
    deadline (whichever ``kind`` names is the one reached).
    """

    kind: BoundKind
    after: float
    cooperative: float
    cleanup: float
    timeout: timedelta | None = None
    deadline: datetime | None = None

    @property
    def error_class(self) -> str:
        return ATTEMPT_TIMEOUT if self.kind == "timeout" else DEADLINE_EXCEEDED

    def reached(self) -> str:
        """What was reached, for messages: ``its timeout of 0:00:05`` or the deadline."""
        if self.kind == "timeout":
            return f"its timeout of {self.timeout}"
        assert self.deadline is not None
        return f"its job's deadline {self.deadline.isoformat()}"


def graces_for(timeout: timedelta | None, graces: GracePeriods) -> tuple[float, float]:
    """The cooperative and cleanup graces of an expired attempt, in seconds: the worker's,
    each capped at ``timeout`` (when there is one)."""
    cooperative, cleanup = graces.cancellation_grace_period, graces.cleanup_grace_period
    if timeout is None:
        return cooperative, cleanup
    seconds = timeout.total_seconds()
    return min(cooperative, seconds), min(cleanup, seconds)


def attempt_bound(
    *,
    timeout: timedelta | None,
    deadline: datetime | None,
    now: datetime,
    graces: GracePeriods,
) -> AttemptBound | None:
    """The bound of an attempt invoked at ``now``; None when it has none.

    ``timeout`` is the job's stored override or else its actor's; ``deadline``
    the job's ``schedule_to_close``. The earlier expiry wins (the timeout on a
    tie: it says more about the attempt).
    """
    if timeout is None and deadline is None:
        return None
    cooperative, cleanup = graces_for(timeout, graces)
    if deadline is not None:
        left = max((deadline - now).total_seconds(), 0.0)
        if timeout is None or left < timeout.total_seconds():
            return AttemptBound("deadline", left, cooperative, cleanup, timeout, deadline)
    assert timeout is not None
    return AttemptBound("timeout", timeout.total_seconds(), cooperative, cleanup, timeout, deadline)


__all__ = [
    "ATTEMPT_TIMEOUT",
    "DEADLINE_EXCEEDED",
    "AttemptBound",
    "BoundKind",
    "attempt_bound",
    "graces_for",
]
