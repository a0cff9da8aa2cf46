"""The Postgres enqueuer runs its plan's statements, and falls back as the plan says,
on a scripted driver: no database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

from taskq.adapters.postgres.driver import Driver, Row
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store.base import LockBudgets
from taskq.adapters.postgres.store.enqueue import Enqueuer
from taskq.domain.errors import UniqueForLockTimeoutError
from taskq.domain.job import EnqueueResult, NewJob


class ScriptedDriver:
    """Answers each named query with the next scripted answer; records every call."""

    def __init__(self, answers: dict[str, list[Any]]) -> None:
        self.answers = answers
        self.calls: list[str] = []
        self.params: list[dict[str, object]] = []

    def _answer(self, query: str, params: dict[str, object]) -> Any:
        self.calls.append(query)
        self.params.append(params)
        script = self.answers.get(query, [None])
        return script.pop(0) if len(script) > 1 else script[0]

    async def fetch(self, query: str, /, **params: object) -> Sequence[Row]:
        rows: Sequence[Row] = self._answer(query, params) or []
        return rows

    async def fetchrow(self, query: str, /, **params: object) -> Row | None:
        row: Row | None = self._answer(query, params)
        return row

    async def fetchval(self, query: str, /, **params: object) -> Any:
        return self._answer(query, params)

    async def execute(self, query: str, /, **params: object) -> None:
        self._answer(query, params)

    async def copy_in(
        self, schema: str, table: str, columns: Sequence[str], data: Iterable[bytes]
    ) -> None:
        self._answer("COPY", {"rows": b"".join(data).count(b"\n")})

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Driver]:
        self.calls.append("BEGIN")
        yield self
        self.calls.append("COMMIT")


def enqueuer() -> Enqueuer:
    return Enqueuer(Schema("s"), LockBudgets())


OPEN: dict[str, object] = {"open": True, "ids": [1, 2]}
LIMITED: dict[str, object] = {"open": False, "ids": []}


async def test_a_plain_job_is_one_bare_insert() -> None:
    driver = ScriptedDriver({"insert_job_bare": [{"inserted_id": 5}]})
    result = await enqueuer().enqueue_one(driver, NewJob(actor="a"), None)
    assert result == EnqueueResult(5)
    assert driver.calls == ["insert_job_bare"]


async def test_a_stored_max_pending_sends_a_single_job_to_the_locked_path() -> None:
    driver = ScriptedDriver(
        {
            "insert_job_bare": [None],  # wrote nothing: a stored max_pending applies
            "enqueue_lookup": [[{"kind": "actor", "actor": "a", "waiting": 0, "max_pending": 1}]],
            "insert_jobs": [{"open": True, "ids": [8]}],
        }
    )
    result = await enqueuer().enqueue_one(driver, NewJob(actor="a"), None)
    assert result == EnqueueResult(8)
    assert driver.calls == [
        "insert_job_bare",
        "BEGIN",
        "lock_max_pending",
        "enqueue_lookup",
        "insert_jobs",
        "COMMIT",
    ]
    # Under the lock the rules ran here; the statement need not check limits again.
    assert driver.params[-1]["check_limits"] is False


async def test_a_plain_batch_is_one_insert_and_falls_back_when_limited() -> None:
    driver = ScriptedDriver({"insert_jobs": [OPEN]})
    results = await enqueuer().enqueue_many(driver, [NewJob(actor="a")] * 2, None, bound=False)
    assert [r.job_id for r in results] == [1, 2]
    assert driver.calls == ["insert_jobs"]

    limited = ScriptedDriver({"insert_jobs": [LIMITED, OPEN], "enqueue_lookup": [[]]})
    await enqueuer().enqueue_many(limited, [NewJob(actor="a")] * 2, None, bound=False)
    assert limited.calls == [
        "insert_jobs",
        "BEGIN",
        "lock_max_pending",
        "enqueue_lookup",
        "insert_jobs",
        "COMMIT",
    ]


async def test_a_keyed_job_that_lost_a_race_is_run_again() -> None:
    raced = {"existing_id": None, "inserted_id": None, "open": True}
    winner = {"existing_id": 3, "inserted_id": None, "open": True}
    driver = ScriptedDriver({"insert_job_keyed": [raced, winner]})
    result = await enqueuer().enqueue_one(driver, NewJob(actor="a", identity_key="k"), None)
    assert result == EnqueueResult(3, was_existing=True)
    assert driver.calls == ["insert_job_keyed", "insert_job_keyed"]


async def test_a_keyed_job_that_keeps_losing_races_is_refused() -> None:
    raced = {"existing_id": None, "inserted_id": None, "open": True}
    driver = ScriptedDriver({"insert_job_keyed": [raced]})
    with pytest.raises(UniqueForLockTimeoutError):
        await enqueuer().enqueue_one(driver, NewJob(actor="a", identity_key="k"), None)


async def test_a_keyed_batch_seeing_a_stored_max_pending_takes_the_lock() -> None:
    stored = [{"kind": "actor", "actor": "a", "waiting": 0, "max_pending": 5}]
    driver = ScriptedDriver({"enqueue_lookup": [stored], "insert_jobs": [OPEN]})
    batch = [NewJob(actor="a", idempotency_key="x"), NewJob(actor="a", idempotency_key="y")]
    await enqueuer().enqueue_many(driver, batch, None, bound=False)
    assert driver.calls == [
        "enqueue_lookup",
        "BEGIN",
        "lock_max_pending",
        "enqueue_lookup",
        "insert_jobs",
        "COMMIT",
    ]


async def test_a_bound_enqueue_runs_in_a_savepoint_and_restores_lock_timeout() -> None:
    driver = ScriptedDriver(
        {"current_lock_timeout": ["7s"], "insert_job_bare": [{"inserted_id": 1}]}
    )
    await enqueuer().enqueue_many(driver, [NewJob(actor="a")], None, bound=True)
    assert driver.calls == [
        "current_lock_timeout",
        "BEGIN",
        "insert_job_bare",
        "COMMIT",
        "set_lock_timeout",
    ]
    assert driver.params[-1] == {"lock_timeout": "7s"}
