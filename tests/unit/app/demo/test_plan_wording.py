"""The demo's plan lines agree with their counts: a small run has one flaky email or one
declined card ("1 uses a test card", not "1 use")."""

from __future__ import annotations

from taskq.app.demo.plan import DemoPlan


def test_the_verbs_agree_with_one_job_and_with_several() -> None:
    plan = DemoPlan.for_jobs(7)
    assert (plan.flaky_emails, plan.declined) == (1, 1)
    email, card = plan.describe()[:2]
    assert "1 fails its first 1-2 attempts (mail server busy), then succeeds on a retry" in email
    assert ": 1 uses a test card that is declined every time" in card
    email, card = DemoPlan.for_jobs(300).describe()[:2]
    assert ": 45 fail their first 1-2 attempts (mail server busy), then succeed on a retry" in email
    assert ": 9 use a test card that is declined every time" in card
