"""Dispatch reference model: ordering, fairness cohorts, per-actor capacity, limit."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from taskq.domain.actor_config import QueueMode
from taskq.domain.dispatch import (
    DispatchCandidate,
    advance_cursors,
    cohort_of,
    dispatch_order,
    eligible,
    residual_capacity,
    select_for_dispatch,
)
from taskq.domain.job import NULL_COHORT

T0 = datetime(2024, 1, 1, tzinfo=UTC)
RR = QueueMode.ROUND_ROBIN
FIFO = QueueMode.STRICT_FIFO


def job(
    id: int,
    *,
    queue: str = "default",
    actor: str = "a",
    priority: int = 0,
    at: int = 0,
    key: str | None = None,
) -> DispatchCandidate:
    return DispatchCandidate(
        id=id,
        queue=queue,
        actor=actor,
        priority=priority,
        scheduled_at=T0 + timedelta(seconds=at),
        fairness_key=key,
    )


def ids(cs: list[DispatchCandidate]) -> list[int]:
    return [c.id for c in cs]


def take(
    cs: list[DispatchCandidate],
    *,
    modes: dict[str, QueueMode] | None = None,
    residual: dict[str, int | None] | None = None,
    limit: int = 100,
    cursors: dict[str, str] | None = None,
) -> list[int]:
    return ids(
        select_for_dispatch(
            cs, modes=modes or {}, residual=residual or {}, limit=limit, cursors=cursors
        )
    )


# ------------------------------------------------------------------ strict FIFO


def test_strict_fifo_orders_by_priority_desc_then_time_then_id() -> None:
    """Strict FIFO takes higher priority first, then earlier scheduled_at, then lower id."""
    cs = [
        job(5, priority=0, at=0),
        job(4, priority=1, at=9),
        job(3, priority=0, at=1),
        job(2, priority=0, at=0),
        job(1, priority=-1, at=0),
        job(6, priority=1, at=2),
    ]
    assert take(cs) == [6, 4, 2, 5, 3, 1]


def test_order_does_not_depend_on_input_order() -> None:
    """The same candidates in any input order give the same dispatch order."""
    cs = [
        job(i, priority=i % 3, at=i % 4, queue=f"q{i % 2}", key=f"k{i % 3}") for i in range(1, 30)
    ]
    modes = {"q0": RR}
    expected = ids(dispatch_order(cs, modes))
    rng = random.Random(7)
    for _ in range(20):
        shuffled = cs[:]
        rng.shuffle(shuffled)
        assert ids(dispatch_order(shuffled, modes)) == expected


def test_strict_fifo_spans_queues_and_ignores_fairness_keys() -> None:
    """All strict_fifo queues form one cohort; a fairness_key there changes nothing."""
    cs = [
        job(1, queue="a", key="t1", at=0),
        job(2, queue="a", key="t1", at=1),
        job(3, queue="b", key="t2", at=2),
        job(4, queue="b", key=None, at=3),
    ]
    assert take(cs, modes={"a": FIFO}) == [1, 2, 3, 4]


def test_unknown_queue_defaults_to_strict_fifo() -> None:
    """A queue absent from modes behaves as strict_fifo even when other queues are round robin."""
    cs = [
        job(1, queue="plain", key="x"),
        job(2, queue="plain", key="x", at=1),
        job(3, queue="plain", key="y", at=2),
    ]
    assert take(cs, modes={"other": RR}) == [1, 2, 3]


# ------------------------------------------------------------------ round robin


def test_round_robin_takes_one_job_per_cohort_per_round() -> None:
    """Round robin interleaves fairness cohorts: each round takes every cohort's next job."""
    cs = [
        job(1, queue="rr", key="big", at=0),
        job(2, queue="rr", key="big", at=1),
        job(3, queue="rr", key="big", at=2),
        job(4, queue="rr", key="big", at=3),
        job(5, queue="rr", key="small", at=10),
        job(6, queue="rr", key="small", at=11),
        job(7, queue="rr", key="tiny", at=20),
    ]
    # rounds: {1,5,7} {2,6} {3} {4}; within a round by (priority desc, time, id)
    assert take(cs, modes={"rr": RR}) == [1, 5, 7, 2, 6, 3, 4]


def test_round_robin_limit_spreads_across_cohorts() -> None:
    """A deep cohort cannot fill a small batch while other cohorts wait."""
    cs = [job(i, queue="rr", key="deep", at=i) for i in range(1, 50)]
    cs += [job(100, queue="rr", key="other", at=99)]
    assert take(cs, modes={"rr": RR}, limit=2) == [1, 100]


def test_round_robin_ranks_within_cohort_by_priority_then_time() -> None:
    """Inside a cohort the order is priority desc, scheduled_at, id."""
    cs = [
        job(1, queue="rr", key="t", priority=0, at=0),
        job(2, queue="rr", key="t", priority=5, at=9),
        job(3, queue="rr", key="u", priority=0, at=0),
        job(4, queue="rr", key="u", priority=0, at=0),
    ]
    # round 0: 2 (t, prio 5) then 3 (u); round 1: 1 then 4
    assert take(cs, modes={"rr": RR}) == [2, 3, 1, 4]


def test_round_robin_within_a_round_cohorts_take_turns_in_key_order() -> None:
    """Within one round cohorts take turns in key order: priority and time order a
    cohort's own jobs, not the cohorts (else one-job claims could not rotate)."""
    cs = [
        job(1, queue="rr", key="a", priority=0, at=5),
        job(2, queue="rr", key="b", priority=3, at=0),
        job(3, queue="rr", key="b", priority=3, at=1),
    ]
    assert take(cs, modes={"rr": RR}) == [1, 2, 3]


def test_round_robin_cursor_starts_the_round_after_the_last_cohort_served() -> None:
    """A queue's cursor (the cohort its last claim took last) sends the cohorts after it
    first, then the rest from the start; other queues' cursors change nothing."""
    cs = [job(i, queue="rr", key=k, at=i) for i, k in enumerate("ABCABC", start=1)]
    assert take(cs, modes={"rr": RR}, cursors={"rr": "B"}) == [3, 1, 2, 6, 4, 5]
    assert take(cs, modes={"rr": RR}, cursors={"rr": "C"}) == [1, 2, 3, 4, 5, 6]
    assert take(cs, modes={"rr": RR}, cursors={"other": "A"}) == [1, 2, 3, 4, 5, 6]
    assert take(cs, modes={}, cursors={"rr": "B"}) == [1, 2, 3, 4, 5, 6]


def test_advance_cursors_keeps_the_last_cohort_taken_per_round_robin_queue() -> None:
    """After a claim each round_robin queue's cursor is the cohort of the last job it took
    there (no key: __null__); strict_fifo queues get none; untouched queues keep theirs."""
    modes = {"rr": RR, "rr2": RR}
    taken = [("rr", "A"), ("s", "X"), ("rr", None)]
    assert advance_cursors({"rr2": "Q"}, taken, modes) == {"rr": NULL_COHORT, "rr2": "Q"}


def test_one_job_claims_rotate_through_the_cohorts() -> None:
    """Claims of one job, the cursor moved after each, serve A, B, C, A, B, C although
    A's jobs are all older (without the cursor: A, A, B, B, C, C)."""
    cs = [job(i, queue="rr", key=k, at=i) for i, k in enumerate("AABBCC", start=1)]
    modes = {"rr": RR}
    cursors: dict[str, str] = {}
    served = []
    while cs:
        (picked,) = select_for_dispatch(cs, modes=modes, residual={}, limit=1, cursors=cursors)
        served.append(picked.fairness_key)
        cursors = advance_cursors(cursors, [(picked.queue, picked.fairness_key)], modes)
        cs = [c for c in cs if c.id != picked.id]
    assert "".join(k or "" for k in served) == "ABCABC"


def test_round_robin_without_keys_degenerates_to_strict_order() -> None:
    """On a round_robin queue where no job has a key, all share __null__: plain FIFO order."""
    cs = [job(i, queue="rr", priority=i % 2, at=10 - i) for i in range(1, 8)]
    assert take(cs, modes={"rr": RR}) == take(cs, modes={})


def test_null_cohort_is_one_cohort_among_keyed_ones() -> None:
    """Keyless jobs form the single __null__ cohort, which takes its turn like any key."""
    cs = [
        job(1, queue="rr", key=None, at=0),
        job(2, queue="rr", key=None, at=1),
        job(3, queue="rr", key="t", at=2),
        job(4, queue="rr", key=NULL_COHORT, at=3),
    ]
    # an explicit "__null__" key is the same cohort as no key
    assert take(cs, modes={"rr": RR}) == [1, 3, 2, 4]


def test_empty_fairness_key_counts_as_no_key() -> None:
    """An empty-string fairness_key joins the __null__ cohort (SQL must match: NULLIF(key, ''))."""
    assert cohort_of(job(1, queue="rr", key=""), {"rr": RR}) == ("round_robin", NULL_COHORT)


def test_same_fairness_key_on_two_round_robin_queues_is_one_cohort() -> None:
    """Cohorts are per fairness_key across round_robin queues, not per (queue, key)."""
    assert cohort_of(job(1, queue="r1", key="t"), {"r1": RR, "r2": RR}) == cohort_of(
        job(2, queue="r2", key="t"), {"r1": RR, "r2": RR}
    )
    cs = [
        job(1, queue="r1", key="t", at=0),
        job(2, queue="r2", key="t", at=1),
        job(3, queue="r2", key="u", at=2),
    ]
    assert take(cs, modes={"r1": RR, "r2": RR}) == [1, 3, 2]


def test_cohort_of_names_mode_and_key() -> None:
    """cohort_of is ('strict_fifo', '') on strict queues and ('round_robin', key) otherwise."""
    modes = {"rr": RR, "s": FIFO}
    assert cohort_of(job(1, queue="s", key="t"), modes) == ("strict_fifo", "")
    assert cohort_of(job(1, queue="nowhere", key="t"), modes) == ("strict_fifo", "")
    assert cohort_of(job(1, queue="rr", key="t"), modes) == ("round_robin", "t")
    assert cohort_of(job(1, queue="rr"), modes) == ("round_robin", NULL_COHORT)


def test_mixed_queues_strict_jobs_form_one_cohort_beside_fairness_cohorts() -> None:
    """With strict and round_robin queues together, the strict jobs take one turn per round."""
    cs = [
        job(1, queue="s", at=0),
        job(2, queue="s", at=1),
        job(3, queue="s", at=2),
        job(4, queue="rr", key="x", at=3),
        job(5, queue="rr", key="x", at=4),
        job(6, queue="rr", key="y", at=5),
    ]
    assert take(cs, modes={"rr": RR, "s": FIFO}) == [1, 4, 6, 2, 5, 3]


# -------------------------------------------------------------------- capacity


def test_exhausted_actor_is_skipped_without_blocking_others() -> None:
    """An actor at its max_concurrent is skipped; later jobs of other actors are still taken."""
    cs = [
        job(1, actor="busy", at=0),
        job(2, actor="busy", at=1),
        job(3, actor="busy", at=2),
        job(4, actor="free", at=3),
        job(5, actor="free", at=4),
    ]
    assert take(cs, residual={"busy": 1}) == [1, 4, 5]


def test_residual_zero_or_negative_takes_nothing_for_that_actor() -> None:
    """Residual zero (or below) means no capacity: none of that actor's jobs are taken."""
    cs = [job(1, actor="z", at=0), job(2, actor="n", at=1), job(3, actor="ok", at=2)]
    assert take(cs, residual={"z": 0, "n": -2, "ok": 1}) == [3]


def test_residual_none_or_missing_is_unlimited() -> None:
    """A None residual, or an actor absent from the mapping, is unlimited."""
    cs = [job(i, actor="none" if i % 2 else "absent", at=i) for i in range(1, 9)]
    assert take(cs, residual={"none": None}) == list(range(1, 9))


def test_residual_is_counted_per_actor_across_queues_and_cohorts() -> None:
    """One actor's residual is shared by its jobs on every queue and cohort in the batch."""
    cs = [
        job(1, actor="a", queue="rr", key="x", at=0),
        job(2, actor="a", queue="rr", key="y", at=1),
        job(3, actor="a", queue="s", at=2),
        job(4, actor="b", queue="s", at=3),
    ]
    # round 0: the strict_fifo cohort (4) leads, then cohorts x (1) and y (2)
    assert take(cs, modes={"rr": RR}, residual={"a": 2}) == [4, 1, 2]


def test_capacity_keeps_each_actors_earliest_jobs_in_fifo_order() -> None:
    """A capped actor's first residual jobs in FIFO order are eligible, whatever their cohort."""
    cs = [
        job(1, actor="a", queue="rr", key="x", priority=0, at=0),
        job(2, actor="a", queue="rr", key="y", priority=1, at=5),
        job(3, actor="a", queue="rr", key="y", priority=0, at=1),
        job(4, actor="b", queue="rr", key="x", priority=0, at=2),
    ]
    assert ids(eligible(cs, {"a": 2})) == [2, 1, 4]
    # round 0: 1 (x) and 2 (y), in key order; round 1: 4 (x)
    assert take(cs, modes={"rr": RR}, residual={"a": 2}) == [1, 2, 4]


def test_excluded_job_does_not_hold_its_cohorts_round() -> None:
    """A job left out for capacity takes no round: its cohort's next eligible job moves up."""
    cs = [
        job(1, actor="capped", queue="rr", key=None, at=0),
        job(2, actor="free", queue="rr", key=None, at=0),
        job(3, actor="free", queue="rr", key="t", at=0),
    ]
    # Without the cap the order is 1, 3, 2; with "capped" at zero, 2 is the
    # __null__ cohort's first eligible job and competes in round 0 (id 2 < 3).
    assert take(cs, modes={"rr": RR}) == [1, 3, 2]
    assert take(cs, modes={"rr": RR}, residual={"capped": 0}, limit=1) == [2]


def test_select_does_not_mutate_the_residual_mapping() -> None:
    """The caller's residual mapping is left untouched."""
    residual: dict[str, int | None] = {"a": 2}
    select_for_dispatch([job(1), job(2)], modes={}, residual=residual, limit=10)
    assert residual == {"a": 2}


# ----------------------------------------------------------------------- limit


def test_limit_truncates_in_dispatch_order() -> None:
    """At most limit jobs are taken: the first ones in dispatch order."""
    cs = [job(i, at=i) for i in range(1, 10)]
    assert take(cs, limit=3) == [1, 2, 3]


def test_limit_counts_only_taken_jobs() -> None:
    """Skipped jobs do not use up the limit."""
    cs = [
        job(1, actor="full", at=0),
        job(2, actor="full", at=1),
        job(3, actor="b", at=2),
        job(4, actor="b", at=3),
    ]
    assert take(cs, residual={"full": 0}, limit=2) == [3, 4]


@pytest.mark.parametrize("limit", [0, -1])
def test_non_positive_limit_takes_nothing(limit: int) -> None:
    """A limit of zero or less takes nothing."""
    assert take([job(1), job(2)], limit=limit) == []


def test_no_candidates_takes_nothing() -> None:
    """No candidates, no jobs."""
    assert take([]) == []
    assert dispatch_order([], {}) == []


# ------------------------------------------------------------ residual_capacity


def test_residual_capacity_subtracts_running_and_clamps_at_zero() -> None:
    """Residual is max_concurrent minus running, never below zero; None stays unlimited."""
    assert residual_capacity(
        {"a": 5, "b": 2, "c": None, "d": 3}, {"a": 2, "b": 4, "c": 100, "ghost": 1}
    ) == {"a": 3, "b": 0, "c": None, "d": 3}


def test_residual_capacity_feeds_select() -> None:
    """An actor whose running count reached max_concurrent gets nothing in the next claim."""
    residual = residual_capacity({"a": 2, "b": 3}, {"a": 2, "b": 1})
    cs = [
        job(1, actor="a"),
        job(2, actor="b", at=1),
        job(3, actor="b", at=2),
        job(4, actor="b", at=3),
    ]
    assert take(cs, residual=residual) == [2, 3]
