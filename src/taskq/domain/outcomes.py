"""How one attempt ended (outcomes) and what happens next (decisions).

An actor body ends an attempt by returning, by raising an error, or by raising
one of two control-flow exceptions: :class:`Snooze` and :class:`RetryAfter`.
These are requests, not failures, so they deliberately sit outside the
``TaskQError`` hierarchy. The worker shell turns the way the attempt ended
into an :data:`Outcome`; ``taskq.domain.retry.decide`` maps it to a
:data:`Decision` the shell then writes to the store::

    Outcome                      Decision
    ───────                      ────────
    Succeeded(result)            Complete(result)
    Raised(cls, msg, retryable)  Retry(run_at, refund_attempt, cls, msg) | Fail
      (and its traceback)          (each carrying the traceback on)
    PayloadInvalid(msg)          Fail("PayloadValidationError", msg)
    Snoozed(delay)               SnoozeUntil(run_at) | Fail("DeadlineExceeded")
    RetriedAfter(delay, budget)  Retry(run_at, ...) | Fail
    CancelledByRequest()         Cancel()
    Interrupted(cls, msg)        Interrupt(retryable, cls, msg)
    LateStart(deadline, claimed) Fail("DeadlineExceeded")
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from taskq.domain.job import JSON
from taskq.domain.tracebacks import traceback_text


def _check_delay(delay: timedelta, what: str) -> None:
    if not isinstance(delay, timedelta):
        raise TypeError(f"{what} delay must be a timedelta, got {type(delay).__name__}")
    if delay < timedelta(0):
        raise ValueError(f"{what} delay must be >= 0, got {delay}")


# --- control-flow exceptions raised by actor bodies ------------------------------------


class Snooze(Exception):  # a request to the worker, not an error
    """Put this job back to wait ``delay``; the attempt is not counted.

    Raise it from an actor body. The job's ``snooze_count`` grows by one. If
    the job's deadline has passed (or would pass before ``delay`` is over) the
    job fails with ``DeadlineExceeded`` instead.
    """

    def __init__(self, delay: timedelta) -> None:
        _check_delay(delay, "Snooze")
        self.delay = delay
        super().__init__(delay)

    def __str__(self) -> str:
        return f"snooze for {self.delay}"


class RetryAfter(Exception):  # a request to the worker, not an error
    """Run this job again after exactly ``delay`` (no backoff formula, no jitter).

    With ``consume_budget`` (the default) the attempt counts against
    ``max_attempts``, so a transient job with no attempts left fails; without
    it the attempt is refunded. A passed deadline always fails the job.
    """

    def __init__(self, delay: timedelta, consume_budget: bool = True) -> None:
        _check_delay(delay, "RetryAfter")
        self.delay = delay
        self.consume_budget = consume_budget
        super().__init__(delay, consume_budget)

    def __str__(self) -> str:
        budget = "consuming" if self.consume_budget else "not consuming"
        return f"retry after {self.delay} ({budget} an attempt)"


# --- outcomes: how one attempt ended -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Succeeded:
    """The actor returned ``result``."""

    result: JSON = None


@dataclass(frozen=True, slots=True)
class Raised:
    """The actor raised an error. ``retryable=False`` forbids any retry of it.

    ``traceback`` is the error's traceback text, size-bounded and without local
    variables (:func:`taskq.domain.tracebacks.traceback_text`), or None when
    there is none to tell (an exception never raised, an error the worker
    describes itself).
    """

    error_class: str
    message: str
    retryable: bool = True
    traceback: str | None = None

    @classmethod
    def from_exception(cls, exc: BaseException, *, retryable: bool = True) -> Raised:
        """The outcome of ``exc``: its class, its (bounded) message and, if it was
        raised, its traceback."""
        tb = None if exc.__traceback__ is None else traceback_text(exc)
        return cls(type(exc).__name__, exception_text(exc), retryable, tb)


#: Longest exception message an outcome keeps; a message can be megabytes (a dumped
#: response body, the repr of a large object), and it is stored with the job and
#: with each attempt, and logged.
MAX_ERROR_MESSAGE = 8_000


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, at most :data:`MAX_ERROR_MESSAGE` characters (the cut is said),
    and never an error itself: a ``__str__`` that raises gives a placeholder."""
    try:
        text = str(exc)
    except Exception as err:
        text = f"<str() of this {type(exc).__name__} raised {type(err).__name__}>"
    if len(text) > MAX_ERROR_MESSAGE:
        cut = len(text) - MAX_ERROR_MESSAGE
        text = f"{text[:MAX_ERROR_MESSAGE]}… [{cut:,} more characters cut]"
    return text


@dataclass(frozen=True, slots=True)
class PayloadInvalid:
    """The payload did not validate against the actor's model; the actor never ran."""

    message: str


@dataclass(frozen=True, slots=True)
class Snoozed:
    """The actor raised :class:`Snooze`."""

    delay: timedelta

    def __post_init__(self) -> None:
        _check_delay(self.delay, "Snoozed")


@dataclass(frozen=True, slots=True)
class RetriedAfter:
    """The actor raised :class:`RetryAfter`."""

    delay: timedelta
    consume_budget: bool = True

    def __post_init__(self) -> None:
        _check_delay(self.delay, "RetriedAfter")


@dataclass(frozen=True, slots=True)
class CancelledByRequest:
    """The attempt ended because a cancel was requested (cooperatively or forced)."""


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The worker stopped the attempt for its own reasons (its shutdown, a lost lease):
    not the job's failure and not a user's cancel. ``error_class`` names the reason."""

    error_class: str
    message: str


@dataclass(frozen=True, slots=True)
class LateStart:
    """The job's deadline had passed when it was claimed (database time); the actor never
    ran. The deadline sweep fails such waiting jobs every 30 s; a claim can come first."""

    deadline: datetime
    claimed_at: datetime


Outcome = (
    Succeeded
    | Raised
    | PayloadInvalid
    | Snoozed
    | RetriedAfter
    | CancelledByRequest
    | Interrupted
    | LateStart
)


def outcome_from_exception(
    exc: Exception, *, retryable: bool = True
) -> Snoozed | RetriedAfter | Raised:
    """The outcome of an attempt whose actor body raised ``exc``.

    ``retryable`` applies only to ordinary errors; control-flow requests keep
    their own meaning.
    """
    if isinstance(exc, Snooze):
        return Snoozed(exc.delay)
    if isinstance(exc, RetryAfter):
        return RetriedAfter(exc.delay, exc.consume_budget)
    return Raised.from_exception(exc, retryable=retryable)


# --- decisions: what the worker writes next ------------------------------------------


@dataclass(frozen=True, slots=True)
class Complete:
    """Mark the job succeeded with ``result``."""

    result: JSON = None


@dataclass(frozen=True, slots=True)
class Retry:
    """Reschedule the job to run at ``run_at``.

    ``refund_attempt`` undoes the claim's attempt increment (a ``RetryAfter``
    that does not consume budget). ``error_class``/``error`` are what the
    attempt recorded; ``None`` when it ended without an error. ``traceback``
    is the failed attempt's, when it had one.
    """

    run_at: datetime
    refund_attempt: bool
    error_class: str | None
    error: str | None
    traceback: str | None = None


@dataclass(frozen=True, slots=True)
class SnoozeUntil:
    """Reschedule the job to ``run_at`` as a snooze: attempt refunded, snooze_count + 1."""

    run_at: datetime

    @property
    def refund_attempt(self) -> bool:
        """Always true: snoozes never consume attempts."""
        return True


@dataclass(frozen=True, slots=True)
class Fail:
    """Mark the job failed; ``error`` says what happened; ``traceback`` is the last
    attempt's, when its error had one."""

    error_class: str
    error: str
    traceback: str | None = None


@dataclass(frozen=True, slots=True)
class Cancel:
    """Mark the job cancelled."""


@dataclass(frozen=True, slots=True)
class Interrupt:
    """Hand the interrupted job back (``JobFinisher.interrupt``): a ``retryable`` one waits
    again with its attempt refunded, any other is abandoned (it never runs twice)."""

    retryable: bool
    error_class: str
    error: str


Decision = Complete | Retry | SnoozeUntil | Fail | Cancel | Interrupt

__all__ = [
    "MAX_ERROR_MESSAGE",
    "Cancel",
    "CancelledByRequest",
    "Complete",
    "Decision",
    "Fail",
    "Interrupt",
    "Interrupted",
    "LateStart",
    "Outcome",
    "PayloadInvalid",
    "Raised",
    "RetriedAfter",
    "Retry",
    "RetryAfter",
    "Snooze",
    "SnoozeUntil",
    "Snoozed",
    "Succeeded",
    "exception_text",
    "outcome_from_exception",
]
