"""``decide`` for a job claimed after its deadline: it fails, whatever the policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from taskq.domain.outcomes import Fail, LateStart
from taskq.domain.retry import DEADLINE_EXCEEDED, RetryPolicy, decide

DEADLINE = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
CLAIMED = DEADLINE + timedelta(seconds=7)


@pytest.mark.parametrize(
    "policy",
    [
        RetryPolicy(),
        RetryPolicy(kind="indefinite"),
        RetryPolicy(kind="non_retryable"),
        RetryPolicy(max_attempts=100),
    ],
    ids=["default", "indefinite", "non_retryable", "many attempts"],
)
def test_a_late_start_fails_with_deadline_exceeded(policy: RetryPolicy) -> None:
    decision = decide(
        policy,
        attempt=1,
        outcome=LateStart(DEADLINE, CLAIMED),
        now=CLAIMED + timedelta(seconds=1),
        schedule_to_close=DEADLINE,
        max_retry_backoff=timedelta(hours=1),
        rng=lambda low, high: (low + high) / 2,
    )
    assert decision == Fail(
        DEADLINE_EXCEEDED,
        f"deadline {DEADLINE.isoformat()} passed at {CLAIMED.isoformat()}; "
        "the job was claimed after it and did not run",
    )
