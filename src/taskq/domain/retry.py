"""Retry policy, backoff and the one decision made when an attempt ends.

``attempt`` is always the attempt that just ended, counted from 1 (the claim
increments it). ``schedule_to_close`` is the job's deadline, if any.

Backoff (``raw_backoff``, then ``backoff_delay``)::

    exponential  base * 2^(attempt-1)
    linear       base * attempt
    fixed        base
    cap          = min(policy.cap, max_retry_backoff)          (global ceiling)
    delay        = min(min(raw, cap) * uniform(1-jitter, 1+jitter), cap)

Decision (``decide``), first matching row wins::

    outcome             condition                                      decision
    ──────────────────  ─────────────────────────────────────────────  ────────────────────────
    Succeeded           always (even past the deadline)                Complete(result)
    CancelledByRequest  always                                         Cancel()
    Interrupted         always (not the job's failure: no attempt      Interrupt(retryable =
                          used; a non_retryable job is abandoned)        kind != non_retryable)
    PayloadInvalid      always (never retried)                         Fail(PayloadValidationError)
    LateStart           always (the actor never ran)                   Fail(DeadlineExceeded)
    Raised              retryable=False or kind non_retryable          Fail(<error class>)
                        transient and attempt >= max_attempts          Fail(<error class>)
                        deadline passed (now >= deadline)              Fail(DeadlineExceeded)
                        now + backoff at/after the deadline            Fail(DeadlineExceeded)
                        otherwise                                      Retry(now + backoff)
                        (every decision on a Raised carries its traceback;
                        an attempt stopped at its timeout or running deadline
                        is a Raised of class AttemptTimeout / DeadlineExceeded)
    Snoozed             deadline passed, or now + delay at/after it    Fail(DeadlineExceeded)
                        otherwise                                      SnoozeUntil(now + delay)
    RetriedAfter        deadline passed                                Fail(DeadlineExceeded)
                        consume_budget and (non_retryable, or          Fail(RetryAfter)
                          transient and attempt >= max_attempts)
                        now + delay at/after the deadline              Fail(DeadlineExceeded)
                        otherwise                                      Retry(now + delay,
                                                                         refund=not consume_budget)

Choices at the edges, each the option that loses nothing:

- A success or a cancel is honoured even past the deadline: the work is done
  (or the cancel was asked for); failing it would throw the result away.
- An exhausted or non-retryable error fails with its *own* class before the
  deadline is considered, so the real cause is what gets recorded. A
  DeadlineExceeded message still names the attempt's error.
- A reschedule that would land at or after the deadline fails now with
  DeadlineExceeded rather than sleeping until the deadline sweep fails it
  anyway, without ever running it.
- ``indefinite`` with no deadline (no ``time_budget``, no ``schedule_to_close``)
  retries forever; backoff is still capped, so the job is never stranded.
- ``RetryAfter(consume_budget=False)`` is honoured even under ``non_retryable``
  and with no attempts left: the actor explicitly asked for it, and only the
  deadline bounds it.
- Snoozes never consume attempts (the shell refunds them), under every kind.
- A run time beyond ``datetime.max`` saturates there instead of raising, so an
  absurd delay keeps the job (visibly far in the future) rather than crashing
  the consumer that is trying to write its outcome.
- ``jitter`` draws outside ``[1-jitter, 1+jitter]`` from the injected source
  are clamped into it (NaN counts as no jitter): a bad random source can
  never break the bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Literal, assert_never, get_args

from taskq.domain.errors import DeadlineExceeded, PayloadValidationError
from taskq.domain.outcomes import (
    Cancel,
    CancelledByRequest,
    Complete,
    Decision,
    Fail,
    Interrupt,
    Interrupted,
    LateStart,
    Outcome,
    PayloadInvalid,
    Raised,
    RetriedAfter,
    Retry,
    RetryAfter,
    Snoozed,
    SnoozeUntil,
    Succeeded,
)

RetryKind = Literal["transient", "indefinite", "non_retryable"]
BackoffKind = Literal["exponential", "linear", "fixed"]

#: A uniform random source like :func:`random.uniform`: ``rng(a, b)`` in ``[a, b]``.
Uniform = Callable[[float, float], float]

#: Default of ``TASKQ_MAX_RETRY_BACKOFF``, the global ceiling on one backoff.
DEFAULT_MAX_RETRY_BACKOFF = timedelta(hours=24)

DEADLINE_EXCEEDED = DeadlineExceeded.__name__
PAYLOAD_VALIDATION_ERROR = PayloadValidationError.__name__
RETRY_AFTER = RetryAfter.__name__

_US = timedelta(microseconds=1)
_MAX_US = timedelta.max // _US
# Shifting even 1µs by this many bits exceeds timedelta.max, so a larger
# exponent cannot change the (saturated) result; it only stops huge ints.
_MAX_SHIFT = _MAX_US.bit_length()


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How an actor's failed attempts are retried (see the module docstring).

    ``time_budget`` only has an effect for ``indefinite``: it becomes the job's
    deadline at enqueue (:func:`deadline_at_enqueue`).
    """

    kind: RetryKind = "transient"
    max_attempts: int = 3
    time_budget: timedelta | None = None
    backoff: BackoffKind = "exponential"
    base: timedelta = timedelta(seconds=5)
    cap: timedelta = timedelta(hours=1)
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.kind not in get_args(RetryKind):
            raise ValueError(
                f"RetryPolicy.kind must be one of {get_args(RetryKind)}, got {self.kind!r}"
            )
        if self.backoff not in get_args(BackoffKind):
            raise ValueError(
                f"RetryPolicy.backoff must be one of {get_args(BackoffKind)}, got {self.backoff!r}"
            )
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ValueError(f"RetryPolicy.max_attempts must be an int, got {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise ValueError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}")
        for name in ("base", "cap") + (("time_budget",) if self.time_budget is not None else ()):
            value = getattr(self, name)
            if not isinstance(value, timedelta):  # a bare number: seconds or hours?
                raise ValueError(
                    f"RetryPolicy.{name} must be a datetime.timedelta (e.g. "
                    f"timedelta(seconds=5)), got {value!r}"
                )
        if self.time_budget is not None and self.time_budget <= timedelta(0):
            raise ValueError(
                f"RetryPolicy.time_budget must be > 0 when set, got {self.time_budget}"
            )
        if self.time_budget is not None and self.kind != "indefinite":
            # It would be ignored: only an indefinite policy turns it into a deadline.
            raise ValueError(
                f"RetryPolicy.time_budget applies only to kind='indefinite', got "
                f"kind={self.kind!r} (set a deadline per job with schedule_to_close instead)"
            )
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, int | float):
            raise ValueError(f"RetryPolicy.jitter must be a number, got {self.jitter!r}")
        if self.base < timedelta(0):
            raise ValueError(f"RetryPolicy.base must be >= 0, got {self.base}")
        if self.cap < timedelta(0):
            raise ValueError(f"RetryPolicy.cap must be >= 0, got {self.cap}")
        if not 0.0 <= self.jitter <= 1.0:  # also rejects NaN
            raise ValueError(f"RetryPolicy.jitter must be in [0.0, 1.0], got {self.jitter}")

    @property
    def job_max_attempts(self) -> int | None:
        """The ``max_attempts`` to store on a job (``NewJob.max_attempts``).

        It lets the maintenance sweep decide re-pend versus crashed for a job
        whose worker died: ``None`` (unbounded) for indefinite, 1 for
        non_retryable, ``max_attempts`` for transient.
        """
        if self.kind == "indefinite":
            return None
        if self.kind == "non_retryable":
            return 1
        return self.max_attempts


def _check_attempt(attempt: int) -> None:
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ValueError(f"attempt must be an int >= 1, got {attempt!r}")


def _to_us(delta: timedelta) -> int:
    return delta // _US


def raw_backoff(policy: RetryPolicy, attempt: int) -> timedelta:
    """The uncapped backoff after ``attempt`` failed, saturating at ``timedelta.max``."""
    _check_attempt(attempt)
    base_us = _to_us(policy.base)
    if policy.backoff == "fixed":
        us = base_us
    elif policy.backoff == "linear":
        us = base_us * attempt
    else:
        us = base_us << min(attempt - 1, _MAX_SHIFT)
    return timedelta(microseconds=min(us, _MAX_US))


def effective_cap(policy: RetryPolicy, max_retry_backoff: timedelta) -> timedelta:
    """The per-attempt ceiling: ``min(policy.cap, max_retry_backoff)``."""
    if max_retry_backoff < timedelta(0):
        raise ValueError(f"max_retry_backoff must be >= 0, got {max_retry_backoff}")
    return min(policy.cap, max_retry_backoff)


def backoff_delay(
    policy: RetryPolicy, attempt: int, *, max_retry_backoff: timedelta, rng: Uniform
) -> timedelta:
    """The jittered, capped delay before the retry that follows ``attempt``.

    Always within ``[capped * (1 - jitter), min(capped * (1 + jitter), cap)]``
    where ``cap = effective_cap(...)`` and ``capped = min(raw, cap)``.
    """
    cap_us = _to_us(effective_cap(policy, max_retry_backoff))
    capped_us = min(_to_us(raw_backoff(policy, attempt)), cap_us)
    low, high = 1.0 - policy.jitter, 1.0 + policy.jitter
    factor = rng(low, high)
    factor = 1.0 if math.isnan(factor) else min(max(factor, low), high)
    # Exact rational product, rounded half-even like timedelta * float, but
    # without overflowing when capped is near timedelta.max.
    jittered_us = round(capped_us * Fraction(factor))
    return timedelta(microseconds=max(0, min(jittered_us, cap_us)))


def _at(now: datetime, delay: timedelta) -> datetime:
    """``now + delay``, saturating at ``datetime.max`` (see module docstring)."""
    try:
        return now + delay
    except OverflowError:
        return datetime.max.replace(tzinfo=now.tzinfo)


def deadline_at_enqueue(
    policy: RetryPolicy, *, enqueued_at: datetime, schedule_to_close: datetime | None
) -> datetime | None:
    """The deadline to store on a new job.

    For ``indefinite`` with a ``time_budget`` it is ``enqueued_at + time_budget``,
    or the explicit ``schedule_to_close`` if that is earlier (the stricter
    bound wins). Otherwise ``schedule_to_close`` is returned unchanged.
    """
    if policy.kind != "indefinite" or policy.time_budget is None:
        return schedule_to_close
    budget_deadline = _at(enqueued_at, policy.time_budget)
    if schedule_to_close is None:
        return budget_deadline
    return min(budget_deadline, schedule_to_close)


def _attempt_label(policy: RetryPolicy, attempt: int) -> str:
    if policy.kind == "transient":
        return f"attempt {attempt} of {policy.max_attempts}"
    return f"attempt {attempt}"


def _deadline_passed(
    deadline: datetime, now: datetime, what: str, traceback: str | None = None
) -> Fail:
    return Fail(
        DEADLINE_EXCEEDED,
        f"deadline {deadline.isoformat()} passed at {now.isoformat()}; {what}",
        traceback,
    )


def _too_late(
    deadline: datetime, run_at: datetime, what: str, traceback: str | None = None
) -> Fail:
    return Fail(
        DEADLINE_EXCEEDED,
        f"{what}; the next run at {run_at.isoformat()} would not start before "
        f"deadline {deadline.isoformat()}",
        traceback,
    )


def _decide_raised(
    policy: RetryPolicy,
    outcome: Raised,
    *,
    attempt: int,
    now: datetime,
    deadline: datetime | None,
    max_retry_backoff: timedelta,
    rng: Uniform,
) -> Decision:
    failed = f"{_attempt_label(policy, attempt)} failed: {outcome.error_class}: {outcome.message}"
    tb = outcome.traceback
    if not outcome.retryable:
        return Fail(outcome.error_class, f"{failed} (error is not retryable)", tb)
    if policy.kind == "non_retryable":
        return Fail(outcome.error_class, f"{failed} (policy is non_retryable)", tb)
    if policy.kind == "transient" and attempt >= policy.max_attempts:
        return Fail(outcome.error_class, failed, tb)
    if deadline is not None and now >= deadline:
        return _deadline_passed(deadline, now, failed, tb)
    delay = backoff_delay(policy, attempt, max_retry_backoff=max_retry_backoff, rng=rng)
    run_at = _at(now, delay)
    if deadline is not None and run_at >= deadline:
        return _too_late(deadline, run_at, failed, tb)
    return Retry(run_at, False, outcome.error_class, outcome.message, tb)


def _decide_snoozed(outcome: Snoozed, *, now: datetime, deadline: datetime | None) -> Decision:
    what = f"snooze for {outcome.delay} not honoured"
    if deadline is not None and now >= deadline:
        return _deadline_passed(deadline, now, what)
    run_at = _at(now, outcome.delay)
    if deadline is not None and run_at >= deadline:
        return _too_late(deadline, run_at, what)
    return SnoozeUntil(run_at)


def _decide_retried_after(
    policy: RetryPolicy,
    outcome: RetriedAfter,
    *,
    attempt: int,
    now: datetime,
    deadline: datetime | None,
) -> Decision:
    what = f"{_attempt_label(policy, attempt)} asked to retry after {outcome.delay}"
    if deadline is not None and now >= deadline:
        return _deadline_passed(deadline, now, what)
    if outcome.consume_budget:
        if policy.kind == "non_retryable":
            return Fail(
                RETRY_AFTER, f"{what}, consuming an attempt, but the policy is non_retryable"
            )
        if policy.kind == "transient" and attempt >= policy.max_attempts:
            return Fail(RETRY_AFTER, f"{what}, consuming an attempt, but none are left")
    run_at = _at(now, outcome.delay)
    if deadline is not None and run_at >= deadline:
        return _too_late(deadline, run_at, what)
    return Retry(run_at, not outcome.consume_budget, None, None)


def decide(
    policy: RetryPolicy,
    *,
    attempt: int,
    outcome: Outcome,
    now: datetime,
    schedule_to_close: datetime | None,
    max_retry_backoff: timedelta,
    rng: Uniform,
) -> Decision:
    """What the worker does after ``attempt`` ended with ``outcome`` (see the table above).

    Pure: ``now`` and ``rng`` are arguments. Never returns a :class:`Retry` or
    :class:`SnoozeUntil` earlier than ``now`` or at/after ``schedule_to_close``,
    and never retries a transient job whose ``attempt >= max_attempts`` except
    for a ``RetryAfter`` that refunds the attempt.
    """
    _check_attempt(attempt)
    if max_retry_backoff < timedelta(0):
        raise ValueError(f"max_retry_backoff must be >= 0, got {max_retry_backoff}")
    if isinstance(outcome, Succeeded):
        return Complete(outcome.result)
    if isinstance(outcome, CancelledByRequest):
        return Cancel()
    if isinstance(outcome, Interrupted):
        return Interrupt(policy.kind != "non_retryable", outcome.error_class, outcome.message)
    if isinstance(outcome, PayloadInvalid):
        return Fail(PAYLOAD_VALIDATION_ERROR, outcome.message)
    if isinstance(outcome, LateStart):
        return _deadline_passed(
            outcome.deadline, outcome.claimed_at, "the job was claimed after it and did not run"
        )
    if isinstance(outcome, Raised):
        return _decide_raised(
            policy,
            outcome,
            attempt=attempt,
            now=now,
            deadline=schedule_to_close,
            max_retry_backoff=max_retry_backoff,
            rng=rng,
        )
    if isinstance(outcome, Snoozed):
        return _decide_snoozed(outcome, now=now, deadline=schedule_to_close)
    if isinstance(outcome, RetriedAfter):
        return _decide_retried_after(
            policy, outcome, attempt=attempt, now=now, deadline=schedule_to_close
        )
    assert_never(outcome)


__all__ = [
    "DEADLINE_EXCEEDED",
    "DEFAULT_MAX_RETRY_BACKOFF",
    "PAYLOAD_VALIDATION_ERROR",
    "RETRY_AFTER",
    "BackoffKind",
    "RetryKind",
    "RetryPolicy",
    "Uniform",
    "backoff_delay",
    "deadline_at_enqueue",
    "decide",
    "effective_cap",
    "raw_backoff",
]
