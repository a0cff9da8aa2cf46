"""ClaimPace: a claim asks ahead only for the jobs the consumers finish while it is in flight."""

from __future__ import annotations

import pytest

from taskq.app.worker.claim_pace import WEIGHT, ClaimPace


def test_nothing_ahead_until_both_durations_were_seen() -> None:
    """A new worker claims only its free slots: it knows neither how long claims nor
    jobs take."""
    pace = ClaimPace(16)
    assert pace.ahead() == 0
    pace.claim_took(0.001)
    assert pace.ahead() == 0
    fresh = ClaimPace(16)
    fresh.job_ran(0.0)
    assert fresh.ahead() == 0


def test_jobs_far_shorter_than_a_claim_ask_for_a_whole_queue_more() -> None:
    """Every consumer finishes many jobs during a claim: the extra is capped at
    max_concurrency (a worker then holds at most three times that many jobs)."""
    pace = ClaimPace(16)
    pace.claim_took(0.001)
    pace.job_ran(0.00005)
    assert pace.ahead() == 16
    pace.job_ran(0.0)  # an instant job (or a coarse clock) still asks for the cap only
    assert pace.ahead() == 16


def test_the_extra_is_what_the_consumers_finish_during_one_claim() -> None:
    """concurrency × claim time / job time, rounded down: half as long a claim as a job
    frees half the consumers during it."""
    pace = ClaimPace(16)
    pace.claim_took(0.010)
    pace.job_ran(0.020)
    assert pace.ahead() == 8
    slow = ClaimPace(16)
    slow.claim_took(0.001)
    slow.job_ran(1.0)
    assert slow.ahead() == 0  # long jobs: the free slots only, as without a pace


def test_a_claim_that_took_no_time_asks_nothing_ahead() -> None:
    """On a fake clock nothing takes time: claims stay the free slots, whatever the jobs."""
    pace = ClaimPace(4)
    pace.claim_took(0.0)
    pace.job_ran(0.0)
    assert pace.ahead() == 0


def test_durations_are_moving_averages_of_the_recent_ones() -> None:
    """One sample moves an average by WEIGHT of its difference: a burst of slow jobs
    shrinks the extra over a few jobs, not on the first; a negative sample counts as 0."""
    pace = ClaimPace(10)
    pace.claim_took(0.002)
    pace.job_ran(0.001)
    assert pace.ahead() == 10
    pace.job_ran(0.101)
    assert pace.job_seconds is not None
    assert pace.job_seconds == pytest.approx(0.001 + WEIGHT * 0.100)
    assert pace.ahead() == int(10 * 0.002 / pace.job_seconds)
    for _ in range(30):
        pace.job_ran(0.1)
    assert pace.ahead() == 0
    pace.claim_took(-1.0)
    assert pace.claim_seconds == pytest.approx(0.002 * (1 - WEIGHT))


def test_concurrency_must_be_positive() -> None:
    with pytest.raises(ValueError, match="concurrency must be >= 1, got 0"):
        ClaimPace(0)
