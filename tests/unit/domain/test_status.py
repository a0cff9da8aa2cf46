"""Job lifecycle: statuses, legal transitions, terminal and active sets."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskq.domain.errors import IllegalTransition
from taskq.domain.status import (
    TERMINAL,
    TRANSITIONS,
    WAITING,
    JobStatus,
    can_transition,
    check_transition,
)

ALL_PAIRS = list(itertools.product(JobStatus, JobStatus))
LEGAL = [(s, d) for s, d in ALL_PAIRS if d in TRANSITIONS[s]]
ILLEGAL = [(s, d) for s, d in ALL_PAIRS if d not in TRANSITIONS[s]]

# The lifecycle as the worker guide describes it, written out independently of
# TRANSITIONS so that an accidental edit there fails a test.
EXPECTED_LEGAL = {
    ("scheduled", "pending"),
    ("scheduled", "cancelled"),
    ("scheduled", "failed"),
    ("pending", "running"),
    ("pending", "cancelled"),
    ("pending", "failed"),
    ("pending", "scheduled"),
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "cancelled"),
    ("running", "abandoned"),
    ("running", "crashed"),
    ("running", "pending"),
    ("running", "scheduled"),
}


def test_status_values_are_the_stored_strings() -> None:
    """The eight statuses and their stored string values are fixed."""
    assert {s.value for s in JobStatus} == {
        "pending",
        "scheduled",
        "running",
        "succeeded",
        "failed",
        "cancelled",
        "abandoned",
        "crashed",
    }


def test_transition_table_matches_the_lifecycle() -> None:
    """TRANSITIONS allows exactly the lifecycle's transitions, and covers every status."""
    assert set(TRANSITIONS) == set(JobStatus)
    assert {(s.value, d.value) for s, d in LEGAL} == EXPECTED_LEGAL


@pytest.mark.parametrize(("src", "dst"), LEGAL, ids=[f"{s}->{d}" for s, d in LEGAL])
def test_legal_transition_accepted(src: JobStatus, dst: JobStatus) -> None:
    """Every transition listed in TRANSITIONS is accepted."""
    assert can_transition(src, dst)
    check_transition(src, dst)


@pytest.mark.parametrize(("src", "dst"), ILLEGAL, ids=[f"{s}->{d}" for s, d in ILLEGAL])
def test_illegal_transition_rejected(src: JobStatus, dst: JobStatus) -> None:
    """Every pair not in TRANSITIONS raises IllegalTransition naming both statuses."""
    assert not can_transition(src, dst)
    with pytest.raises(IllegalTransition) as info:
        check_transition(src, dst)
    assert f"from {src.value} to {dst.value}" in str(info.value)


def test_no_status_transitions_to_itself() -> None:
    """A job never 'moves' to the status it already has (such writes are bugs, not no-ops)."""
    for s in JobStatus:
        assert not can_transition(s, s)


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_terminal_statuses_have_no_exits(status: JobStatus) -> None:
    """A terminal status never changes again."""
    assert TRANSITIONS[status] == frozenset()


def test_terminal_and_active_sets() -> None:
    """Terminal = the five finished statuses; active = pending, scheduled and running."""
    assert {s.value for s in TERMINAL} == {
        "succeeded",
        "failed",
        "cancelled",
        "abandoned",
        "crashed",
    }
    assert {s for s in JobStatus if s.is_terminal} == TERMINAL
    assert {s.value for s in JobStatus if not s.is_terminal} == {"pending", "scheduled", "running"}
    assert {JobStatus.PENDING, JobStatus.SCHEDULED} == WAITING


@pytest.mark.parametrize("status", list(JobStatus))
def test_terminal_iff_no_exits(status: JobStatus) -> None:
    """is_terminal holds exactly for statuses without exits."""
    assert status.is_terminal is (not TRANSITIONS[status])


def _reachable(start: set[JobStatus]) -> set[JobStatus]:
    seen = set(start)
    frontier = list(start)
    while frontier:
        for nxt in TRANSITIONS[frontier.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return seen


def test_every_status_reachable_from_enqueue() -> None:
    """Every status can be reached from the statuses an enqueue creates (pending/scheduled)."""
    assert _reachable(set(WAITING)) == set(JobStatus)


@pytest.mark.parametrize("status", [s for s in JobStatus if not s.is_terminal])
def test_every_active_status_can_finish(status: JobStatus) -> None:
    """From any active status some terminal status is reachable (no trap without an exit)."""
    assert _reachable({status}) & TERMINAL


@given(st.sampled_from(sorted(WAITING)), st.lists(st.sampled_from(list(JobStatus)), max_size=30))
def test_random_walk_never_leaves_a_terminal_status(
    start: JobStatus, attempts: list[JobStatus]
) -> None:
    """Applying only accepted transitions, a job that reached a terminal status stays there."""
    status = start
    finished: JobStatus | None = None
    for dst in attempts:
        try:
            check_transition(status, dst)
        except IllegalTransition:
            continue
        assert finished is None, f"left terminal {finished} for {dst}"
        status = dst
        if status.is_terminal:
            finished = status
