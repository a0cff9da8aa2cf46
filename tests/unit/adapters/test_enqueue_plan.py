"""The Postgres enqueue plan, without a database: which path a batch takes, the per-job
rules, the lock budgets and what each statement is sent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store.base import LockBudgets
from taskq.adapters.postgres.store.enqueue_plan import (
    COPY_MIN_JOBS,
    Lookup,
    Path,
    apply_rules,
    choose_path,
    insert_job_params,
    insert_jobs_params,
    insert_keyed_params,
    key_budget,
    key_refusal,
    lookup_params,
    max_pending_lock_keys,
    present_columns,
    wake_queue,
)
from taskq.domain.errors import (
    IdempotencyKeyLockTimeoutError,
    MaxPendingExceeded,
    UniqueForLockTimeoutError,
)
from taskq.domain.job import NewJob, UniformJobs

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def jobs(count: int, **fields: object) -> list[NewJob]:
    return [NewJob(actor="a", payload={"n": n}, **fields) for n in range(count)]  # type: ignore[arg-type]


# --- the path ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("batch", "clock_given", "path"),
    [
        (jobs(1), False, Path.BARE),
        (jobs(1), True, Path.SINGLE),  # the caller's clock is a parameter bare lacks
        (jobs(1, metadata={"m": 1}), False, Path.SINGLE),
        (jobs(1, tags=("t",)), False, Path.SINGLE),
        (jobs(1, scheduled_at=NOW), False, Path.SINGLE),
        (jobs(1, fairness_key="f"), False, Path.SINGLE),
        (jobs(1, max_pending=3), False, Path.LOCKED),
        (jobs(1, identity_key="k"), False, Path.KEYED),
        (jobs(1, idempotency_key="k"), True, Path.KEYED),
        (jobs(1, identity_key="k", max_pending=3), False, Path.LOCKED),
        (jobs(2), False, Path.BATCH),
        (jobs(COPY_MIN_JOBS - 1), False, Path.BATCH),
        (jobs(COPY_MIN_JOBS), False, Path.COPY),
        (jobs(COPY_MIN_JOBS, scheduled_at=NOW), True, Path.COPY),
        ([*jobs(1), *jobs(1, idempotency_key="k")], False, Path.LOOKUP),
        (jobs(COPY_MIN_JOBS, identity_key=None, idempotency_key="k"), False, Path.LOOKUP),
        ([*jobs(1), *jobs(1, max_pending=1)], False, Path.LOCKED),
        ([*jobs(1, identity_key="k"), *jobs(1, max_pending=1)], False, Path.LOCKED),
    ],
)
def test_the_cheapest_path_that_keeps_the_rules(
    batch: list[NewJob], clock_given: bool, path: Path
) -> None:
    assert choose_path(batch, clock_given=clock_given) is path


def test_a_uniform_batch_is_planned_from_its_template() -> None:
    plain = UniformJobs(NewJob(actor="a"), [{"n": n} for n in range(COPY_MIN_JOBS)])
    assert choose_path(plain, clock_given=False) is Path.COPY
    limited = UniformJobs(NewJob(actor="a", max_pending=5), [{}, {}])
    assert choose_path(limited, clock_given=False) is Path.LOCKED
    keyed = UniformJobs(NewJob(actor="a", idempotency_key="k"), [{}, {}])
    assert choose_path(keyed, clock_given=False) is Path.LOOKUP


@pytest.mark.parametrize("batch", [jobs(1), jobs(3), jobs(1, identity_key="k")])
def test_a_known_stored_max_pending_goes_straight_to_the_locked_path(
    batch: list[NewJob],
) -> None:
    assert choose_path(batch, clock_given=False, limited=True) is Path.LOCKED


# --- the per-job rules ------------------------------------------------------------------


def test_later_jobs_see_the_keys_of_earlier_ones() -> None:
    batch = [
        NewJob(actor="a", idempotency_key="i"),
        NewJob(actor="a", idempotency_key="i"),
        NewJob(actor="b", idempotency_key="i"),  # keys are per actor
        NewJob(actor="a", identity_key="u"),
        NewJob(actor="a", identity_key="u"),
    ]
    refs, to_insert = apply_rules(batch, Lookup({}, {}, {}, {}), enforce_limits=False)
    assert refs == [
        ((True, 0), False),
        ((True, 0), True),
        ((True, 1), False),
        ((True, 2), False),
        ((True, 2), True),
    ]
    assert to_insert == [batch[0], batch[2], batch[3]]


def test_a_stored_key_matches_the_stored_job_idempotency_first() -> None:
    lookup = Lookup.of(
        [
            {"kind": "idempotency", "actor": "a", "key": "i", "id": 7},
            {"kind": "identity", "actor": "a", "key": "u", "id": 9},
        ]
    )
    both = NewJob(actor="a", idempotency_key="i", identity_key="u")
    refs, to_insert = apply_rules([both], lookup, enforce_limits=False)
    assert refs == [((False, 7), True)]
    assert to_insert == []


def test_max_pending_counts_stored_and_earlier_jobs_when_enforced() -> None:
    rows = [{"kind": "actor", "actor": "a", "waiting": 1, "max_pending": None}]
    batch = jobs(2, max_pending=3)
    refs, _ = apply_rules(batch, Lookup.of(rows), enforce_limits=True)
    assert [is_new for (is_new, _), _ in refs] == [True, True]
    with pytest.raises(MaxPendingExceeded) as refused:
        apply_rules(jobs(3, max_pending=3), Lookup.of(rows), enforce_limits=True)
    assert refused.value.max_pending == 3
    # Unlocked paths never insert under a limit: they are not enforced there.
    apply_rules(jobs(3, max_pending=3), Lookup.of(rows), enforce_limits=False)


def test_a_stored_max_pending_overrides_the_literal() -> None:
    rows = [{"kind": "actor", "actor": "a", "waiting": None, "max_pending": 1}]
    lookup = Lookup.of(rows)
    assert lookup.waiting == {"a": 0}
    assert lookup.limited()
    with pytest.raises(MaxPendingExceeded) as refused:
        apply_rules(jobs(2, max_pending=10), lookup, enforce_limits=True)
    assert refused.value.max_pending == 1


def test_a_job_that_matches_a_key_is_not_counted_against_max_pending() -> None:
    rows = [
        {"kind": "actor", "actor": "a", "waiting": 1, "max_pending": 1},
        {"kind": "identity", "actor": "a", "key": "u", "id": 4},
    ]
    refs, to_insert = apply_rules(jobs(1, identity_key="u"), Lookup.of(rows), enforce_limits=True)
    assert refs == [((False, 4), True)]
    assert to_insert == []


def test_no_stored_max_pending_leaves_the_unlocked_path_open() -> None:
    rows = [{"kind": "actor", "actor": "a", "waiting": 5, "max_pending": None}]
    assert not Lookup.of(rows).limited()


def test_the_lookup_sends_only_the_keyed_jobs_keys() -> None:
    batch = [NewJob(actor="b"), NewJob(actor="a", identity_key="u"), NewJob(actor="a")]
    assert lookup_params(batch, count_waiting=True) == {
        "key_actor": ["a"],
        "identity_key": ["u"],
        "idempotency_key": [None],
        "actors": ["a", "b"],
        "count_waiting": True,
    }


# --- locks ------------------------------------------------------------------------------


def test_the_key_budget_is_the_longest_of_the_keys_a_batch_sets() -> None:
    budgets = LockBudgets(unique_ms=50, idempotency_ms=80, max_pending_ms=999)
    assert key_budget(jobs(2), budgets) is None
    assert key_budget(jobs(1, identity_key="u"), budgets) == 50
    assert key_budget(jobs(1, idempotency_key="i"), budgets) == 80
    both = [*jobs(1, identity_key="u"), *jobs(1, idempotency_key="i")]
    assert key_budget(both, budgets) == 80
    # One key without a bound makes the statement's wait unbounded.
    assert key_budget(both, LockBudgets(unique_ms=0, idempotency_ms=80)) == 0.0


def test_a_key_lock_refusal_names_the_key_that_was_waited_for() -> None:
    assert isinstance(key_refusal(jobs(1, identity_key="u"), "m"), UniqueForLockTimeoutError)
    assert isinstance(
        key_refusal(jobs(1, idempotency_key="i"), "m"), IdempotencyKeyLockTimeoutError
    )


def test_max_pending_locks_are_one_per_actor_in_one_order() -> None:
    batch = [NewJob(actor="b"), NewJob(actor="a"), NewJob(actor="b")]
    assert max_pending_lock_keys(batch, Schema("s")) == [
        "taskq:max_pending:a:s",
        "taskq:max_pending:b:s",
    ]


# --- statement parameters ---------------------------------------------------------------


def test_naive_timestamps_are_refused_before_anything_is_written() -> None:
    with pytest.raises(TypeError, match="scheduled_at"):
        present_columns(jobs(1, scheduled_at=datetime(2026, 1, 1)))
    with pytest.raises(TypeError, match="schedule_to_close"):
        present_columns(jobs(1, schedule_to_close=datetime(2026, 1, 1)))


def test_the_bare_statement_binds_only_the_required_columns() -> None:
    job = NewJob(actor="a", queue="q", payload={"x": 1}, priority=2)
    assert insert_job_params(job, None, bare=True) == {
        "queue": "q",
        "actor": "a",
        "payload": '{"x":1}',
        "priority": 2,
        "max_attempts": 3,
    }
    full = insert_job_params(job, NOW, bare=False)
    assert full["now"] == NOW
    assert full["metadata"] == "{}"
    assert full["tags"] == []


def test_a_batch_sends_a_column_no_job_sets_as_null() -> None:
    batch = [NewJob(actor="a", fairness_key="f"), NewJob(actor="b", queue="other")]
    params = insert_jobs_params(batch, None, check_limits=True, lock_timeout=None)
    assert params["fairness_key"] == ["f", None]
    assert params["scheduled_at"] is None
    assert params["attempt_timeout"] is None
    assert params["metadata"] is None
    assert params["tags"] is None
    assert params["payloads"] == "[{},{}]"
    assert params["limit_actors"] == ["a", "b"]
    assert params["wake_queue"] == ""  # two queues: wake any


def test_the_keyed_statement_carries_its_keys_and_lock_timeout() -> None:
    job = NewJob(
        actor="a",
        identity_key="u",
        idempotency_key="i",
        tags=("t",),
        attempt_timeout=timedelta(seconds=3),
    )
    params = insert_keyed_params(job, None, lock_timeout="50ms")
    assert (params["identity_key"], params["idempotency_key"]) == ("u", "i")
    assert params["lock_timeout"] == "50ms"
    assert params["tags"] == '["t"]'
    assert insert_keyed_params(NewJob(actor="a"), None, lock_timeout=None)["tags"] is None


def test_a_batch_wakes_its_one_queue_else_any() -> None:
    assert wake_queue([NewJob(actor="a", queue="q"), NewJob(actor="b", queue="q")]) == "q"
    assert wake_queue([NewJob(actor="a", queue="q"), NewJob(actor="a")]) == ""
    assert wake_queue(UniformJobs(NewJob(actor="a", queue="u"), [{}, {}])) == "u"
