"""Migration 0008: a succeeded attempt is recorded by its job row, not by a job_attempts row.

The attempt history reads the same as before (the contract suite pins it on
every adapter); these tests pin what Postgres stores, what prune carries to
the archive, and that reverting the migration writes the rows back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from contracts.provision import migrated_schema, resolve_test_dsn

from taskq.adapters.asyncpg import migrate
from taskq.adapters.postgres.schema import Schema
from taskq.domain.job import NewJob
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, Finish, PrunePolicy, Reschedule

pytestmark = pytest.mark.integration

LEASE = timedelta(seconds=60)


@pytest.fixture
async def schema() -> AsyncIterator[Schema]:
    """A schema of its own (the conftest's store opens on it): one test reverts a migration."""
    async with migrated_schema(dsn=resolve_test_dsn(), prefix="taskq_success") as provisioned:
        yield Schema(provisioned.schema)


async def _claim_one(store: Any, worker: str) -> Any:
    [claimed] = await store.claim(
        ClaimRequest(worker_id=worker, queues=["default"], actors=("a",), limit=1, lease=LEASE)
    )
    return claimed


async def _run_to_success(store: Any) -> int:
    """Enqueue a job, fail its first attempt (retried), succeed on the second."""
    [enqueued] = await store.enqueue_many([NewJob(actor="a", payload={"n": 1})])
    first = await _claim_one(store, "w1")
    await store.reschedule(
        Reschedule(
            lease=first.lease, run_at=datetime.now(UTC), error="boom", error_class="RuntimeError"
        )
    )
    second = await _claim_one(store, "w2")
    await store.finish(Finish(lease=second.lease, status=JobStatus.SUCCEEDED, result=7))
    return int(enqueued.job_id)


async def _rows(conn: asyncpg.Connection, schema: Schema, job_id: int) -> list[tuple[Any, ...]]:
    rows = await conn.fetch(
        f"SELECT attempt, worker_id, outcome, error_class FROM {schema.quoted}.job_attempts "
        "WHERE job_id = $1 ORDER BY id",
        job_id,
    )
    return [tuple(r) for r in rows]


async def test_a_succeeded_attempt_is_its_job_row(dsn: str, schema: Schema, store: Any) -> None:
    """No job_attempts row for the success; the history still ends with it, by its worker."""
    job_id = await _run_to_success(store)
    conn = await asyncpg.connect(dsn)
    try:
        assert await _rows(conn, schema, job_id) == [(1, "w1", "retried", "RuntimeError")]
        row = await conn.fetchrow(
            f"SELECT status, attempt, finished_by, finished_at, locked_by "
            f"FROM {schema.quoted}.jobs WHERE id = $1",
            job_id,
        )
    finally:
        await conn.close()
    assert row is not None
    assert (row["status"], row["attempt"], row["finished_by"], row["locked_by"]) == (
        "succeeded",
        2,
        "w2",
        None,
    )
    history = await store.attempts(job_id)
    assert [(a.attempt, a.worker_id, a.outcome, a.error_class, a.error) for a in history] == [
        (1, "w1", "retried", "RuntimeError", "boom"),
        (2, "w2", "succeeded", None, None),
    ]
    assert history[-1].finished_at == row["finished_at"]


async def test_other_terminal_outcomes_keep_their_rows(
    dsn: str, schema: Schema, store: Any
) -> None:
    """A failed job's last attempt is a job_attempts row, as before; finished_by is set too."""
    [enqueued] = await store.enqueue_many([NewJob(actor="a")])
    claimed = await _claim_one(store, "w1")
    await store.finish(
        Finish(lease=claimed.lease, status=JobStatus.FAILED, error="no", error_class="ValueError")
    )
    conn = await asyncpg.connect(dsn)
    try:
        assert await _rows(conn, schema, enqueued.job_id) == [(1, "w1", "failed", "ValueError")]
        assert (
            await conn.fetchval(
                f"SELECT finished_by FROM {schema.quoted}.jobs WHERE id = $1",
                enqueued.job_id,
            )
            == "w1"
        )
    finally:
        await conn.close()
    assert [a.outcome for a in await store.attempts(enqueued.job_id)] == ["failed"]


async def test_prune_carries_the_worker_to_the_archive(
    dsn: str, schema: Schema, store: Any
) -> None:
    job_id = await _run_to_success(store)
    moved = await store.prune(
        PrunePolicy(
            retention={JobStatus.SUCCEEDED: timedelta(0)},
            archive_retention=timedelta(days=1),
            now=datetime.now(UTC) + timedelta(seconds=1),
        )
    )
    assert moved == 1
    conn = await asyncpg.connect(dsn)
    try:
        archived = await conn.fetchval(
            f"SELECT finished_by FROM {schema.quoted}.jobs_archive WHERE id = $1", job_id
        )
    finally:
        await conn.close()
    assert archived == "w2"


async def test_reverting_the_migration_writes_the_succeeded_rows_back(
    dsn: str, schema: Schema, store: Any
) -> None:
    """Down to 0007: every success only a job row recorded gets its job_attempts row."""
    job_id = await _run_to_success(store)
    async with migrate.open_connection(dsn) as conn:
        reverted = await migrate.downgrade(conn, schema, to=7)
        assert [m.version for m in reverted][-2:] == [9, 8]
        rows = await _rows(conn, schema, job_id)
        columns = await conn.fetchval(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_schema = $1 AND column_name = 'finished_by'",
            schema.name,
        )
        await migrate.upgrade(conn, schema)
    assert rows == [(1, "w1", "retried", "RuntimeError"), (2, "w2", "succeeded", None)]
    assert columns == 0
