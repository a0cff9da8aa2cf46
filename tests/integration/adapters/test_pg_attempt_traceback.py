"""Migration 0010: job_attempts keeps each failed attempt's traceback; a success clears the
job row's error columns.

The attempt history and last_error are pinned on every adapter by the contract
suite; these tests pin what Postgres stores (error_class has no port read) and
that the migration reverts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from contracts.provision import migrated_schema, resolve_test_dsn

from taskq.adapters.asyncpg import migrate
from taskq.adapters.postgres.migrator import discover_migrations
from taskq.adapters.postgres.schema import Schema
from taskq.domain.job import NewJob
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, Finish, Reschedule

pytestmark = pytest.mark.integration

LEASE = timedelta(seconds=60)
TRACEBACK = 'Traceback (most recent call last):\n  File "x.py", line 1, in f\nOSError: no\n'


@pytest.fixture
async def schema() -> AsyncIterator[Schema]:
    """A schema of its own (the conftest's store opens on it): one test reverts a migration."""
    async with migrated_schema(dsn=resolve_test_dsn(), prefix="taskq_tb") as provisioned:
        yield Schema(provisioned.schema)


async def _claim_one(store: Any, worker: str) -> Any:
    [claimed] = await store.claim(
        ClaimRequest(worker_id=worker, queues=["default"], actors=("a",), limit=1, lease=LEASE)
    )
    return claimed


async def _fail_then_succeed(store: Any) -> int:
    [enqueued] = await store.enqueue_many([NewJob(actor="a")])
    first = await _claim_one(store, "w1")
    await store.reschedule(
        Reschedule(
            lease=first.lease,
            run_at=datetime.now(UTC),
            error="no",
            error_class="OSError",
            traceback=TRACEBACK,
        )
    )
    second = await _claim_one(store, "w2")
    await store.finish(Finish(lease=second.lease, status=JobStatus.SUCCEEDED))
    return int(enqueued.job_id)


async def test_a_success_clears_the_error_columns_of_the_job_row(
    dsn: str, schema: Schema, store: Any
) -> None:
    """last_error and error_class are NULL after a success; the attempt row keeps both and
    the traceback."""
    job_id = await _fail_then_succeed(store)
    conn = await asyncpg.connect(dsn)
    try:
        job = await conn.fetchrow(
            f"SELECT status, last_error, error_class FROM {schema.quoted}.jobs WHERE id = $1",
            job_id,
        )
        attempt = await conn.fetchrow(
            f"SELECT outcome, error_class, error, traceback FROM {schema.quoted}.job_attempts "
            "WHERE job_id = $1",
            job_id,
        )
    finally:
        await conn.close()
    assert job is not None
    assert attempt is not None
    assert tuple(job) == ("succeeded", None, None)
    assert tuple(attempt) == ("retried", "OSError", "no", TRACEBACK)


async def test_reverting_the_migration_drops_the_column(
    dsn: str, schema: Schema, store: Any
) -> None:
    """Down to 0009 removes job_attempts.traceback (the history reads without it there);
    up again adds it back, empty."""
    job_id = await _fail_then_succeed(store)
    latest = max(m.version for m in discover_migrations())
    async with migrate.open_connection(dsn) as conn:
        reverted = await migrate.downgrade(conn, schema, to=9)
        assert [m.version for m in reverted] == list(range(latest, 9, -1))
        columns = await conn.fetchval(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_schema = $1 AND table_name = 'job_attempts' "
            "AND column_name = 'traceback'",
            schema.name,
        )
        kept = await conn.fetchval(
            f"SELECT count(*) FROM {schema.quoted}.job_attempts WHERE job_id = $1", job_id
        )
        await migrate.upgrade(conn, schema)
    assert (columns, kept) == (0, 1)
    [retried, succeeded] = await store.attempts(job_id)
    assert (retried.outcome, retried.traceback, succeeded.outcome) == ("retried", None, "succeeded")
