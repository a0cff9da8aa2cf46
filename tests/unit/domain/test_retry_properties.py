"""Property tests for backoff bounds and the invariants of ``decide``."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from taskq.domain.outcomes import (
    Cancel,
    CancelledByRequest,
    Complete,
    Fail,
    Outcome,
    PayloadInvalid,
    Raised,
    RetriedAfter,
    Retry,
    Snoozed,
    SnoozeUntil,
    Succeeded,
)
from taskq.domain.retry import RetryPolicy, backoff_delay, decide, effective_cap, raw_backoff

# Bounded so capped * (1 + jitter) stays representable; saturation has unit tests.
delays = st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=1000))
positive = st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=1000))

policies = st.builds(
    RetryPolicy,
    kind=st.sampled_from(["transient", "indefinite", "non_retryable"]),
    max_attempts=st.integers(min_value=1, max_value=20),
    backoff=st.sampled_from(["exponential", "linear", "fixed"]),
    base=delays,
    cap=delays,
    jitter=st.floats(min_value=0.0, max_value=1.0),
).flatmap(
    # time_budget is only valid on indefinite policies
    lambda p: (
        st.just(p)
        if p.kind != "indefinite"
        else (st.none() | positive).map(lambda budget: dataclasses.replace(p, time_budget=budget))
    )
)
attempts = st.integers(min_value=1, max_value=200) | st.integers(min_value=1, max_value=10**30)
ceilings = delays
# Any float, including out-of-band draws, infinities and NaN: the bounds must hold anyway.
draws = st.floats(allow_nan=True, allow_infinity=True)
nows = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
outcomes: st.SearchStrategy[Outcome] = st.one_of(
    st.builds(Succeeded, st.integers()),
    st.builds(Raised, st.sampled_from(["ValueError", "OSError"]), st.text(), st.booleans()),
    st.builds(PayloadInvalid, st.text()),
    st.builds(Snoozed, delays),
    st.builds(RetriedAfter, delays, st.booleans()),
    st.just(CancelledByRequest()),
)
# Deadlines anywhere from well before to well after now, or none.
deadline_offsets = st.none() | st.timedeltas(
    min_value=timedelta(days=-10), max_value=timedelta(days=2000)
)


@given(policy=policies, attempt=attempts, ceiling=ceilings, draw=draws)
def test_backoff_stays_in_the_jitter_band_and_under_the_cap(
    policy: RetryPolicy, attempt: int, ceiling: timedelta, draw: float
) -> None:
    """Backoff lies in [capped*(1-j), min(capped*(1+j), cap)] and never above the effective cap."""
    cap = effective_cap(policy, ceiling)
    capped = min(raw_backoff(policy, attempt), cap)
    delay = backoff_delay(policy, attempt, max_retry_backoff=ceiling, rng=lambda a, b: draw)
    assert capped * (1 - policy.jitter) <= delay <= min(capped * (1 + policy.jitter), cap)
    assert timedelta(0) <= delay <= min(policy.cap, ceiling)


# Compact scales so backoffs, delays, deadlines and attempt limits collide often.
short = st.integers(min_value=0, max_value=60).map(lambda n: timedelta(seconds=n))
tight_policies = st.builds(
    RetryPolicy,
    kind=st.sampled_from(["transient", "indefinite", "non_retryable"]),
    max_attempts=st.integers(min_value=1, max_value=6),
    backoff=st.sampled_from(["exponential", "linear", "fixed"]),
    base=short,
    cap=short,
    jitter=st.floats(min_value=0.0, max_value=1.0),
)
rescheduling: st.SearchStrategy[Outcome] = st.one_of(
    st.builds(Raised, st.just("ValueError"), st.just("boom"), st.booleans()),
    st.builds(Snoozed, short),
    st.builds(RetriedAfter, short, st.booleans()),
)
tight_offsets = st.integers(min_value=-5, max_value=90).map(lambda n: timedelta(seconds=n))


def check_invariants(
    policy: RetryPolicy,
    attempt: int,
    outcome: Outcome,
    now: datetime,
    deadline: datetime | None,
    ceiling: timedelta,
    unit: float,
) -> None:
    decision = decide(
        policy,
        attempt=attempt,
        outcome=outcome,
        now=now,
        schedule_to_close=deadline,
        max_retry_backoff=ceiling,
        rng=lambda a, b: a + unit * (b - a),
    )
    if isinstance(decision, Retry | SnoozeUntil):
        assert decision.run_at >= now
        assert deadline is None or decision.run_at < deadline
    if isinstance(decision, Retry):
        # A transient job past its attempts is only rescheduled when the attempt is refunded.
        exhausted = policy.kind == "transient" and attempt >= policy.max_attempts
        assert not exhausted or decision.refund_attempt
        assert not (policy.kind == "non_retryable" and not decision.refund_attempt)
        # Only a RetryAfter that does not consume budget refunds the attempt.
        refunds = isinstance(outcome, RetriedAfter) and not outcome.consume_budget
        assert decision.refund_attempt == refunds
        if isinstance(outcome, Raised):
            assert outcome.retryable
            assert decision.run_at - now <= effective_cap(policy, ceiling)
    if isinstance(outcome, PayloadInvalid):
        assert decision == Fail("PayloadValidationError", outcome.message)
    if isinstance(outcome, Snoozed):
        assert isinstance(decision, SnoozeUntil | Fail)
    if isinstance(outcome, Succeeded):
        assert decision == Complete(outcome.result)
    if isinstance(outcome, CancelledByRequest):
        assert decision == Cancel()


@given(
    policy=policies,
    attempt=attempts,
    outcome=outcomes,
    now=nows,
    offset=deadline_offsets,
    ceiling=ceilings,
    unit=st.floats(min_value=0.0, max_value=1.0),
)
def test_decide_invariants(
    policy: RetryPolicy,
    attempt: int,
    outcome: Outcome,
    now: datetime,
    offset: timedelta | None,
    ceiling: timedelta,
    unit: float,
) -> None:
    """decide never schedules before now or at/after the deadline, and never over-retries."""
    deadline = None if offset is None else now + offset
    check_invariants(policy, attempt, outcome, now, deadline, ceiling, unit)


@settings(max_examples=300)
@given(
    policy=tight_policies,
    attempt=st.integers(min_value=1, max_value=8),
    outcome=rescheduling,
    now=nows,
    offset=tight_offsets,
    ceiling=short,
    unit=st.floats(min_value=0.0, max_value=1.0),
)
def test_decide_invariants_near_limits(
    policy: RetryPolicy,
    attempt: int,
    outcome: Outcome,
    now: datetime,
    offset: timedelta,
    ceiling: timedelta,
    unit: float,
) -> None:
    """The same invariants hold where delays, deadlines and attempt limits are close together."""
    check_invariants(policy, attempt, outcome, now, now + offset, ceiling, unit)
