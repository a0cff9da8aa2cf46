"""The bound of one attempt: the earlier of its timeout and its job's deadline, with the
worker's graces capped at the timeout."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from taskq.domain.cancel import GracePeriods
from taskq.domain.timeouts import AttemptBound, attempt_bound, graces_for

NOW = datetime(2030, 1, 1, tzinfo=UTC)
WORKER = GracePeriods(cancellation_grace_period=30.0, cleanup_grace_period=10.0)


def test_an_attempt_without_timeout_or_deadline_has_no_bound() -> None:
    """Nothing to arm: the usual job costs nothing."""
    assert attempt_bound(timeout=None, deadline=None, now=NOW, graces=WORKER) is None


def test_the_graces_are_the_workers_capped_at_the_timeout() -> None:
    """A 5 s timeout: 5 s to stop after being told, 5 s more after the cancel; a 1 h one
    and a deadline alone: the worker's 30 s and 10 s."""
    assert graces_for(timedelta(seconds=5), WORKER) == (5.0, 5.0)
    assert graces_for(timedelta(seconds=20), WORKER) == (20.0, 10.0)
    assert graces_for(timedelta(hours=1), WORKER) == (30.0, 10.0)
    assert graces_for(None, WORKER) == (30.0, 10.0)


def test_the_earlier_of_timeout_and_deadline_is_the_bound() -> None:
    """A deadline 3 s away beats a 5 s timeout; one 9 s away does not; a deadline already
    past is reached at once."""
    five = timedelta(seconds=5)
    soon = attempt_bound(timeout=five, deadline=NOW + timedelta(seconds=3), now=NOW, graces=WORKER)
    assert soon == AttemptBound("deadline", 3.0, 5.0, 5.0, five, NOW + timedelta(seconds=3))
    assert soon.error_class == "DeadlineExceeded"
    later = attempt_bound(timeout=five, deadline=NOW + timedelta(seconds=9), now=NOW, graces=WORKER)
    assert later is not None
    assert (later.kind, later.after, later.error_class) == ("timeout", 5.0, "AttemptTimeout")
    assert later.reached() == "its timeout of 0:00:05"
    past = attempt_bound(timeout=None, deadline=NOW - timedelta(1), now=NOW, graces=WORKER)
    assert past is not None
    assert (past.kind, past.after, past.cooperative, past.cleanup) == ("deadline", 0.0, 30.0, 10.0)
