"""Unit tests for the retry policy, backoff formulas, outcomes and ``decide``."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from taskq.domain.errors import TaskQError
from taskq.domain.outcomes import (
    Cancel,
    CancelledByRequest,
    Complete,
    Decision,
    Fail,
    Outcome,
    PayloadInvalid,
    Raised,
    RetriedAfter,
    Retry,
    RetryAfter,
    Snooze,
    Snoozed,
    SnoozeUntil,
    Succeeded,
    outcome_from_exception,
)
from taskq.domain.retry import (
    DEFAULT_MAX_RETRY_BACKOFF,
    RetryKind,
    RetryPolicy,
    Uniform,
    backoff_delay,
    deadline_at_enqueue,
    decide,
    effective_cap,
    raw_backoff,
)

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
KINDS: tuple[RetryKind, ...] = ("transient", "indefinite", "non_retryable")
BOOM = Raised("ValueError", "boom")


def fixed(value: float) -> Uniform:
    """A random source that always draws ``value``."""
    return lambda low, high: value


def middle(low: float, high: float) -> float:
    return (low + high) / 2


def lowest(low: float, high: float) -> float:
    return low


def highest(low: float, high: float) -> float:
    return high


def no_rng(low: float, high: float) -> float:
    raise AssertionError("the random source must not be used here")


def run(
    policy: RetryPolicy,
    outcome: Outcome,
    *,
    attempt: int = 1,
    now: datetime = NOW,
    schedule_to_close: datetime | None = None,
    max_retry_backoff: timedelta = DEFAULT_MAX_RETRY_BACKOFF,
    rng: Uniform = middle,
) -> Decision:
    return decide(
        policy,
        attempt=attempt,
        outcome=outcome,
        now=now,
        schedule_to_close=schedule_to_close,
        max_retry_backoff=max_retry_backoff,
        rng=rng,
    )


# --- control-flow exceptions and outcome types -----------------------------------------


def test_control_flow_exceptions_are_not_taskq_errors() -> None:
    """Snooze and RetryAfter are plain Exceptions, outside the TaskQError hierarchy."""
    for exc in (Snooze(S), RetryAfter(S)):
        assert isinstance(exc, Exception)
        assert not isinstance(exc, TaskQError)


@pytest.mark.parametrize("make", [Snooze, RetryAfter, Snoozed, RetriedAfter])
def test_negative_delay_is_rejected(make: Any) -> None:
    """Every snooze/retry-after carrier rejects a negative delay with a ValueError."""
    with pytest.raises(ValueError, match="delay must be >= 0"):
        make(-S)


@pytest.mark.parametrize("make", [Snooze, RetryAfter, Snoozed, RetriedAfter])
def test_non_timedelta_delay_is_rejected(make: Any) -> None:
    """A delay given as a number instead of a timedelta is a TypeError, not a silent bug."""
    with pytest.raises(TypeError, match="must be a timedelta"):
        make(5)


def test_zero_delay_is_allowed() -> None:
    """A zero delay is a valid request (run again as soon as possible)."""
    assert Snooze(timedelta(0)).delay == timedelta(0)
    assert RetryAfter(timedelta(0)).delay == timedelta(0)


def test_retry_after_consumes_budget_by_default() -> None:
    """RetryAfter counts against max_attempts unless told otherwise."""
    assert RetryAfter(S).consume_budget is True
    assert RetriedAfter(S).consume_budget is True
    assert RetryAfter(S, consume_budget=False).consume_budget is False


def test_control_flow_exceptions_describe_themselves() -> None:
    """str() of the control-flow exceptions says what was requested."""
    assert str(Snooze(10 * S)) == "snooze for 0:00:10"
    assert str(RetryAfter(10 * S)) == "retry after 0:00:10 (consuming an attempt)"
    assert str(RetryAfter(S, False)) == "retry after 0:00:01 (not consuming an attempt)"


def test_outcome_from_exception_maps_control_flow_and_errors() -> None:
    """Snooze → Snoozed, RetryAfter → RetriedAfter, anything else → Raised with class and text."""
    assert outcome_from_exception(Snooze(3 * S)) == Snoozed(3 * S)
    assert outcome_from_exception(RetryAfter(3 * S, False)) == RetriedAfter(3 * S, False)
    assert outcome_from_exception(ValueError("boom")) == Raised("ValueError", "boom", True)
    assert outcome_from_exception(KeyError("k"), retryable=False) == Raised(
        "KeyError", "'k'", False
    )


def test_outcomes_and_decisions_are_frozen() -> None:
    """Outcome and decision values cannot be mutated after construction."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        BOOM.message = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Fail("A", "b").error = "c"  # type: ignore[misc]


def test_snooze_until_always_refunds_the_attempt() -> None:
    """A snooze decision tells the shell to refund the attempt."""
    assert SnoozeUntil(NOW).refund_attempt is True


# --- RetryPolicy ------------------------------------------------------------------------


def test_policy_defaults_match_the_worker_guide() -> None:
    """The default policy is transient, 3 attempts, exponential 5s base, 1h cap, 0.2 jitter."""
    p = RetryPolicy()
    assert (p.kind, p.max_attempts, p.time_budget, p.backoff) == (
        "transient",
        3,
        None,
        "exponential",
    )
    assert (p.base, p.cap, p.jitter) == (5 * S, timedelta(hours=1), 0.2)
    assert timedelta(hours=24) == DEFAULT_MAX_RETRY_BACKOFF


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"kind": "sometimes"}, "kind"),
        ({"backoff": "quadratic"}, "backoff"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"time_budget": timedelta(0)}, "time_budget"),
        ({"time_budget": -S}, "time_budget"),
        ({"base": -S}, "base"),
        ({"cap": -S}, "cap"),
        ({"jitter": -0.01}, "jitter"),
        ({"jitter": 1.01}, "jitter"),
        ({"jitter": float("nan")}, "jitter"),
        ({"jitter": "0.2"}, "jitter"),
        ({"base": 5}, "base"),
        ({"cap": 3600.0}, "cap"),
        ({"kind": "indefinite", "time_budget": 3600}, "time_budget"),
        ({"time_budget": timedelta(hours=2)}, "time_budget"),  # transient: it would be ignored
        ({"kind": "non_retryable", "time_budget": timedelta(hours=2)}, "time_budget"),
    ],
)
def test_policy_rejects_invalid_fields_naming_them(kwargs: dict[str, Any], field: str) -> None:
    """Each invalid field raises a ValueError whose message names that field."""
    with pytest.raises(ValueError, match=rf"RetryPolicy\.{field} "):
        RetryPolicy(**kwargs)


def test_policy_accepts_boundary_values() -> None:
    """Zero base/cap, jitter 0 and 1, one attempt and a tiny budget are all valid."""
    RetryPolicy(base=timedelta(0), cap=timedelta(0), jitter=0.0, max_attempts=1)
    RetryPolicy(jitter=1.0, kind="indefinite", time_budget=timedelta(microseconds=1))


def test_policy_is_keyword_only_and_frozen() -> None:
    """Policies are built by keyword and cannot be changed afterwards."""
    with pytest.raises(TypeError):
        RetryPolicy("transient")  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        RetryPolicy().max_attempts = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kind", "expected"), [("transient", 7), ("indefinite", None), ("non_retryable", 1)]
)
def test_job_max_attempts_per_kind(kind: RetryKind, expected: int | None) -> None:
    """The stored job max_attempts is max_attempts, unbounded, or 1 depending on kind."""
    assert RetryPolicy(kind=kind, max_attempts=7).job_max_attempts == expected


# --- backoff formulas -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [
        ("exponential", [5, 10, 20, 40, 80]),
        ("linear", [5, 10, 15, 20, 25]),
        ("fixed", [5, 5, 5, 5, 5]),
    ],
)
def test_raw_backoff_formulas(backoff: Any, expected: list[int]) -> None:
    """exponential = base*2^(attempt-1), linear = base*attempt, fixed = base."""
    policy = RetryPolicy(backoff=backoff)
    assert [raw_backoff(policy, a) for a in range(1, 6)] == [n * S for n in expected]


@pytest.mark.parametrize("attempt", [0, -1])
def test_raw_backoff_rejects_attempts_below_one(attempt: int) -> None:
    """Attempts are counted from 1; anything lower is a programming error."""
    with pytest.raises(ValueError, match="attempt must be an int >= 1"):
        raw_backoff(RetryPolicy(), attempt)


@pytest.mark.parametrize("backoff", ["exponential", "linear"])
def test_raw_backoff_saturates_for_huge_attempts(backoff: Any) -> None:
    """A huge attempt number saturates at timedelta.max instead of overflowing."""
    assert raw_backoff(RetryPolicy(backoff=backoff), 10**20) == timedelta.max


def test_raw_backoff_with_zero_base_stays_zero() -> None:
    """A zero base gives zero delay however many attempts have failed."""
    assert raw_backoff(RetryPolicy(base=timedelta(0)), 10**12) == timedelta(0)


def test_effective_cap_is_the_smaller_ceiling() -> None:
    """The effective cap is min(policy.cap, max_retry_backoff)."""
    assert effective_cap(RetryPolicy(cap=10 * S), timedelta(hours=24)) == 10 * S
    assert effective_cap(RetryPolicy(cap=timedelta(days=365)), 20 * S) == 20 * S


def test_effective_cap_rejects_negative_global_ceiling() -> None:
    """A negative max_retry_backoff is refused with a message naming it."""
    with pytest.raises(ValueError, match="max_retry_backoff"):
        effective_cap(RetryPolicy(), -S)


def test_backoff_delay_asks_rng_for_the_jitter_band() -> None:
    """The random source is asked for a factor in [1 - jitter, 1 + jitter]."""
    calls: list[tuple[float, float]] = []

    def recording(low: float, high: float) -> float:
        calls.append((low, high))
        return 1.0

    backoff_delay(RetryPolicy(jitter=0.25), 1, max_retry_backoff=S * 100, rng=recording)
    assert calls == [(0.75, 1.25)]


@pytest.mark.parametrize(
    ("rng", "expected"),
    [(fixed(1.0), 20 * S), (lowest, 16 * S), (highest, 24 * S), (fixed(1.1), 22 * S)],
)
def test_backoff_delay_applies_multiplicative_jitter(rng: Uniform, expected: timedelta) -> None:
    """The delay is the raw backoff times the drawn factor (attempt 3: 20s raw)."""
    policy = RetryPolicy()
    assert (
        backoff_delay(policy, 3, max_retry_backoff=DEFAULT_MAX_RETRY_BACKOFF, rng=rng) == expected
    )


@pytest.mark.parametrize(
    ("rng", "expected"), [(fixed(1.0), 30 * S), (highest, 30 * S), (lowest, 24 * S)]
)
def test_backoff_delay_is_capped_by_policy_cap(rng: Uniform, expected: timedelta) -> None:
    """Raw is capped first, jitter applies to the capped value, and the result never exceeds cap."""
    policy = RetryPolicy(cap=30 * S)
    assert (
        backoff_delay(policy, 10, max_retry_backoff=DEFAULT_MAX_RETRY_BACKOFF, rng=rng) == expected
    )


def test_backoff_delay_is_capped_by_global_ceiling() -> None:
    """A policy cap above max_retry_backoff is overridden by the global ceiling."""
    policy = RetryPolicy(cap=timedelta(days=365))
    assert backoff_delay(policy, 40, max_retry_backoff=10 * S, rng=highest) == 10 * S
    assert backoff_delay(policy, 40, max_retry_backoff=10 * S, rng=lowest) == 8 * S


@pytest.mark.parametrize(
    ("draw", "expected"), [(5.0, 12 * S), (-3.0, 8 * S), (float("nan"), 10 * S)]
)
def test_backoff_delay_clamps_a_misbehaving_rng(draw: float, expected: timedelta) -> None:
    """Draws outside the jitter band are clamped into it; NaN means no jitter."""
    policy = RetryPolicy(backoff="fixed", base=10 * S)
    assert (
        backoff_delay(policy, 1, max_retry_backoff=DEFAULT_MAX_RETRY_BACKOFF, rng=fixed(draw))
        == expected
    )


def test_backoff_delay_without_jitter_is_exact() -> None:
    """With jitter 0 the delay is exactly the capped raw backoff."""
    policy = RetryPolicy(backoff="linear", jitter=0.0)
    assert (
        backoff_delay(policy, 4, max_retry_backoff=DEFAULT_MAX_RETRY_BACKOFF, rng=fixed(1.0))
        == 20 * S
    )


def test_backoff_delay_with_zero_cap_is_zero() -> None:
    """A zero cap means retry immediately, whatever the jitter draws."""
    assert backoff_delay(RetryPolicy(cap=timedelta(0)), 5, max_retry_backoff=S, rng=highest) == (
        timedelta(0)
    )


def test_backoff_delay_near_timedelta_max_does_not_overflow() -> None:
    """Even with unbounded ceilings and maximal jitter the delay stays at timedelta.max."""
    policy = RetryPolicy(cap=timedelta.max, jitter=1.0)
    delay = backoff_delay(policy, 10**9, max_retry_backoff=timedelta.max, rng=highest)
    assert delay == timedelta.max


# --- deadline at enqueue ----------------------------------------------------------------


def test_time_budget_sets_the_deadline_for_indefinite() -> None:
    """indefinite + time_budget → deadline = enqueued_at + time_budget."""
    policy = RetryPolicy(kind="indefinite", time_budget=timedelta(hours=2))
    got = deadline_at_enqueue(policy, enqueued_at=NOW, schedule_to_close=None)
    assert got == NOW + timedelta(hours=2)


def test_earlier_explicit_deadline_wins_over_time_budget() -> None:
    """An explicit schedule_to_close earlier than the budget deadline is kept."""
    policy = RetryPolicy(kind="indefinite", time_budget=timedelta(hours=2))
    explicit = NOW + timedelta(hours=1)
    assert deadline_at_enqueue(policy, enqueued_at=NOW, schedule_to_close=explicit) == explicit


def test_budget_deadline_wins_over_later_explicit_deadline() -> None:
    """An explicit schedule_to_close later than the budget deadline is tightened to it."""
    policy = RetryPolicy(kind="indefinite", time_budget=timedelta(hours=2))
    explicit = NOW + timedelta(hours=3)
    got = deadline_at_enqueue(policy, enqueued_at=NOW, schedule_to_close=explicit)
    assert got == NOW + timedelta(hours=2)


@pytest.mark.parametrize(
    "policy",
    [
        RetryPolicy(kind="indefinite"),
        RetryPolicy(kind="transient"),
        RetryPolicy(kind="non_retryable"),
    ],
)
@pytest.mark.parametrize("explicit", [None, NOW + timedelta(hours=5)])
def test_deadline_unchanged_without_indefinite_budget(
    policy: RetryPolicy, explicit: datetime | None
) -> None:
    """Without kind=indefinite and a time_budget the explicit deadline passes through."""
    assert deadline_at_enqueue(policy, enqueued_at=NOW, schedule_to_close=explicit) == explicit


def test_budget_deadline_saturates_at_datetime_max() -> None:
    """A budget reaching past year 9999 saturates at datetime.max instead of overflowing."""
    policy = RetryPolicy(kind="indefinite", time_budget=timedelta.max)
    got = deadline_at_enqueue(policy, enqueued_at=NOW, schedule_to_close=None)
    assert got == datetime.max.replace(tzinfo=UTC)


def test_time_budget_deadline_stops_indefinite_retries() -> None:
    """Once the budget deadline from enqueue has passed, an indefinite job fails."""
    policy = RetryPolicy(kind="indefinite", time_budget=timedelta(minutes=10))
    deadline = deadline_at_enqueue(policy, enqueued_at=NOW, schedule_to_close=None)
    later = NOW + timedelta(minutes=10)
    decision = run(policy, BOOM, attempt=50, now=later, schedule_to_close=deadline)
    assert isinstance(decision, Fail)
    assert decision.error_class == "DeadlineExceeded"


# --- decide: terminal outcomes ----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_success_completes_even_past_the_deadline(kind: RetryKind) -> None:
    """Succeeded → Complete with the result, whatever the kind or deadline."""
    decision = run(
        RetryPolicy(kind=kind), Succeeded({"n": 1}), attempt=9, schedule_to_close=NOW - S
    )
    assert decision == Complete({"n": 1})


@pytest.mark.parametrize("kind", KINDS)
def test_cancel_request_cancels(kind: RetryKind) -> None:
    """CancelledByRequest → Cancel, whatever the kind or deadline."""
    decision = run(RetryPolicy(kind=kind), CancelledByRequest(), schedule_to_close=NOW)
    assert decision == Cancel()


@pytest.mark.parametrize("kind", KINDS)
def test_invalid_payload_fails_and_is_never_retried(kind: RetryKind) -> None:
    """PayloadInvalid → Fail(PayloadValidationError, message) even for indefinite on attempt 1."""
    decision = run(RetryPolicy(kind=kind, max_attempts=10), PayloadInvalid("to: field required"))
    assert decision == Fail("PayloadValidationError", "to: field required")


# --- decide: raised errors --------------------------------------------------------------


@pytest.mark.parametrize("kind", ["transient", "indefinite"])
def test_non_retryable_error_fails_immediately(kind: RetryKind) -> None:
    """Raised(retryable=False) fails with its own class on the first attempt under any kind."""
    decision = run(RetryPolicy(kind=kind, max_attempts=5), Raised("AuthError", "denied", False))
    assert isinstance(decision, Fail)
    assert decision.error_class == "AuthError"
    assert decision.error.endswith("failed: AuthError: denied (error is not retryable)")


def test_non_retryable_policy_fails_any_error() -> None:
    """kind=non_retryable fails the first error with its own class."""
    decision = run(RetryPolicy(kind="non_retryable"), BOOM)
    assert decision == Fail(
        "ValueError", "attempt 1 failed: ValueError: boom (policy is non_retryable)"
    )


@pytest.mark.parametrize("attempt", [1, 2])
def test_transient_retries_with_backoff_before_max_attempts(attempt: int) -> None:
    """transient with attempts left → Retry(now + backoff(attempt)), attempt not refunded."""
    decision = run(RetryPolicy(), BOOM, attempt=attempt, rng=lowest)
    expected_delay = 5 * S * 2 ** (attempt - 1) * 0.8
    assert decision == Retry(NOW + expected_delay, False, "ValueError", "boom")


@pytest.mark.parametrize("attempt", [3, 4])
def test_transient_fails_once_attempts_are_used_up(attempt: int) -> None:
    """transient with attempt >= max_attempts → Fail with the error's class and a clear message."""
    decision = run(RetryPolicy(), BOOM, attempt=attempt, rng=no_rng)
    assert decision == Fail("ValueError", f"attempt {attempt} of 3 failed: ValueError: boom")


def test_single_attempt_transient_never_retries() -> None:
    """max_attempts=1 means the first failure is final."""
    assert isinstance(run(RetryPolicy(max_attempts=1), BOOM, attempt=1), Fail)


def test_indefinite_ignores_max_attempts() -> None:
    """indefinite keeps retrying long after max_attempts, with the capped backoff."""
    decision = run(RetryPolicy(kind="indefinite", max_attempts=3), BOOM, attempt=1000, rng=highest)
    assert decision == Retry(NOW + timedelta(hours=1), False, "ValueError", "boom")


def test_retry_uses_the_global_backoff_ceiling() -> None:
    """decide applies max_retry_backoff to the backoff it schedules."""
    decision = run(RetryPolicy(kind="indefinite"), BOOM, attempt=30, max_retry_backoff=2 * S)
    assert decision == Retry(NOW + 2 * S, False, "ValueError", "boom")


def test_raised_fails_when_deadline_has_passed() -> None:
    """A retryable error at or after the deadline fails with DeadlineExceeded naming the error."""
    decision = run(RetryPolicy(kind="indefinite"), BOOM, attempt=2, schedule_to_close=NOW)
    assert decision == Fail(
        "DeadlineExceeded",
        "deadline 2030-01-01T12:00:00+00:00 passed at 2030-01-01T12:00:00+00:00; "
        "attempt 2 failed: ValueError: boom",
    )


def test_raised_fails_when_next_run_would_land_on_the_deadline() -> None:
    """A retry whose run_at equals the deadline is not scheduled; the job fails instead."""
    policy = RetryPolicy(backoff="fixed", base=5 * S, jitter=0.0)
    decision = run(policy, BOOM, schedule_to_close=NOW + 5 * S)
    assert isinstance(decision, Fail)
    assert decision.error_class == "DeadlineExceeded"
    assert "would not start before deadline 2030-01-01T12:00:05+00:00" in decision.error
    assert "attempt 1 of 3 failed: ValueError: boom" in decision.error


def test_raised_retries_when_next_run_is_just_before_the_deadline() -> None:
    """A retry landing one microsecond before the deadline is still scheduled."""
    policy = RetryPolicy(backoff="fixed", base=5 * S, jitter=0.0)
    deadline = NOW + 5 * S + timedelta(microseconds=1)
    decision = run(policy, BOOM, schedule_to_close=deadline)
    assert decision == Retry(NOW + 5 * S, False, "ValueError", "boom")


def test_exhausted_transient_reports_its_error_not_the_deadline() -> None:
    """With attempts used up and the deadline passed, the real error class is what is recorded."""
    decision = run(RetryPolicy(), BOOM, attempt=3, schedule_to_close=NOW - S)
    assert decision == Fail("ValueError", "attempt 3 of 3 failed: ValueError: boom")


# --- decide: snoozes ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_snooze_reschedules_without_consuming_attempts(kind: RetryKind) -> None:
    """Snoozed → SnoozeUntil(now + delay) under every kind, even with no attempts left."""
    decision = run(RetryPolicy(kind=kind), Snoozed(30 * S), attempt=99, rng=no_rng)
    assert decision == SnoozeUntil(NOW + 30 * S)


def test_zero_snooze_is_due_now() -> None:
    """A zero-length snooze makes the job due immediately."""
    assert run(RetryPolicy(), Snoozed(timedelta(0))) == SnoozeUntil(NOW)


def test_snooze_fails_when_deadline_has_passed() -> None:
    """A snooze at or after the deadline fails with DeadlineExceeded."""
    decision = run(RetryPolicy(), Snoozed(S), schedule_to_close=NOW)
    assert isinstance(decision, Fail)
    assert decision.error_class == "DeadlineExceeded"
    assert "snooze for 0:00:01 not honoured" in decision.error


def test_snooze_fails_when_it_would_reach_the_deadline() -> None:
    """A snooze ending exactly at the deadline fails; one ending just before it is honoured."""
    at_deadline = run(RetryPolicy(), Snoozed(10 * S), schedule_to_close=NOW + 10 * S)
    assert isinstance(at_deadline, Fail)
    assert at_deadline.error_class == "DeadlineExceeded"
    before = run(RetryPolicy(), Snoozed(10 * S), schedule_to_close=NOW + 11 * S)
    assert before == SnoozeUntil(NOW + 10 * S)


def test_absurd_snooze_saturates_instead_of_overflowing() -> None:
    """A snooze past year 9999 with no deadline keeps the job at datetime.max."""
    decision = run(RetryPolicy(), Snoozed(timedelta.max))
    assert decision == SnoozeUntil(datetime.max.replace(tzinfo=UTC))


# --- decide: RetryAfter -------------------------------------------------------------------


def test_retry_after_uses_exact_delay_without_jitter() -> None:
    """RetriedAfter → Retry(now + delay) with no backoff formula and no random draw."""
    decision = run(RetryPolicy(), RetriedAfter(7 * S), attempt=1, rng=no_rng)
    assert decision == Retry(NOW + 7 * S, False, None, None)


def test_retry_after_consuming_budget_fails_when_attempts_are_used_up() -> None:
    """A consuming RetryAfter on the last transient attempt fails the job."""
    decision = run(RetryPolicy(), RetriedAfter(7 * S), attempt=3)
    assert decision == Fail(
        "RetryAfter",
        "attempt 3 of 3 asked to retry after 0:00:07, consuming an attempt, but none are left",
    )


def test_retry_after_without_budget_is_refunded_even_when_attempts_are_used_up() -> None:
    """A non-consuming RetryAfter retries with the attempt refunded, past max_attempts too."""
    decision = run(RetryPolicy(), RetriedAfter(7 * S, consume_budget=False), attempt=3)
    assert decision == Retry(NOW + 7 * S, True, None, None)


def test_retry_after_consuming_budget_fails_under_non_retryable() -> None:
    """A consuming RetryAfter is not honoured by a non_retryable policy."""
    decision = run(RetryPolicy(kind="non_retryable"), RetriedAfter(S))
    assert isinstance(decision, Fail)
    assert decision.error_class == "RetryAfter"
    assert "non_retryable" in decision.error


def test_retry_after_without_budget_is_honoured_under_non_retryable() -> None:
    """A non-consuming RetryAfter is honoured even by a non_retryable policy."""
    decision = run(RetryPolicy(kind="non_retryable"), RetriedAfter(S, False))
    assert decision == Retry(NOW + S, True, None, None)


def test_retry_after_under_indefinite_ignores_max_attempts() -> None:
    """indefinite honours a consuming RetryAfter however many attempts have run."""
    decision = run(RetryPolicy(kind="indefinite"), RetriedAfter(S), attempt=500)
    assert decision == Retry(NOW + S, False, None, None)


@pytest.mark.parametrize("consume", [True, False])
def test_retry_after_fails_when_deadline_has_passed(consume: bool) -> None:
    """A passed deadline fails any RetryAfter with DeadlineExceeded, checked before the budget."""
    decision = run(RetryPolicy(), RetriedAfter(S, consume), attempt=3, schedule_to_close=NOW - S)
    assert isinstance(decision, Fail)
    assert decision.error_class == "DeadlineExceeded"


def test_retry_after_fails_when_it_would_reach_the_deadline() -> None:
    """A RetryAfter landing exactly on the deadline fails with DeadlineExceeded."""
    decision = run(RetryPolicy(), RetriedAfter(5 * S, False), schedule_to_close=NOW + 5 * S)
    assert isinstance(decision, Fail)
    assert decision.error_class == "DeadlineExceeded"


# --- decide: argument checks ----------------------------------------------------------


def test_decide_rejects_attempt_below_one() -> None:
    """decide refuses attempt 0: attempts are counted from 1."""
    with pytest.raises(ValueError, match="attempt must be an int >= 1"):
        run(RetryPolicy(), BOOM, attempt=0)


def test_decide_rejects_negative_global_ceiling() -> None:
    """decide refuses a negative max_retry_backoff, even for outcomes that do not back off."""
    with pytest.raises(ValueError, match="max_retry_backoff"):
        run(RetryPolicy(), Succeeded(), max_retry_backoff=-S)


def test_decide_rejects_unknown_outcomes() -> None:
    """An object that is not an Outcome is refused rather than treated as some default."""
    with pytest.raises(AssertionError):
        run(RetryPolicy(), "done")  # type: ignore[arg-type]
