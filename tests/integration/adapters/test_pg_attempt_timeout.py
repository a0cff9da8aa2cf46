"""Migration 0011: jobs and jobs_archive keep a job's own attempt timeout.

The round trip through enqueue and claim is pinned on every adapter by the
contract suite (contracts/test_attempt_timeout.py); these tests pin what Postgres
stores, that prune carries it to the archive, and that the migration reverts.
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
from taskq.ports.store_params import ClaimRequest, Finish, PrunePolicy

pytestmark = pytest.mark.integration

LEASE = timedelta(seconds=60)
TIMEOUT = timedelta(minutes=5, microseconds=3)


@pytest.fixture
async def schema() -> AsyncIterator[Schema]:
    """A schema of its own (the conftest's store opens on it): one test reverts a migration."""
    async with migrated_schema(dsn=resolve_test_dsn(), prefix="taskq_to") as provisioned:
        yield Schema(provisioned.schema)


async def _columns(conn: Any, schema: Schema) -> list[tuple[str, str]]:
    rows = await conn.fetch(
        "SELECT table_name, data_type FROM information_schema.columns "
        "WHERE table_schema = $1 AND column_name = 'attempt_timeout' ORDER BY table_name",
        schema.name,
    )
    return [(row["table_name"], row["data_type"]) for row in rows]


async def test_prune_carries_the_timeout_to_the_archive(
    dsn: str, schema: Schema, store: Any
) -> None:
    """A job's timeout is an interval column of jobs, and of jobs_archive once pruned."""
    [enqueued] = await store.enqueue_many([NewJob(actor="a", attempt_timeout=TIMEOUT)])
    [claimed] = await store.claim(
        ClaimRequest(worker_id="w1", queues=["default"], actors=("a",), limit=1, lease=LEASE)
    )
    assert claimed.attempt_timeout == TIMEOUT
    await store.finish(Finish(lease=claimed.lease, status=JobStatus.SUCCEEDED))
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
        columns = await _columns(conn, schema)
        archived = await conn.fetchval(
            f"SELECT attempt_timeout FROM {schema.quoted}.jobs_archive WHERE id = $1",
            enqueued.job_id,
        )
    finally:
        await conn.close()
    assert columns == [("jobs", "interval"), ("jobs_archive", "interval")]
    assert archived == TIMEOUT


async def test_reverting_the_migration_drops_the_columns(
    dsn: str, schema: Schema, store: Any
) -> None:
    """Down to 0010 removes attempt_timeout from both tables (the jobs stay); up again adds
    them back, empty."""
    [enqueued] = await store.enqueue_many([NewJob(actor="a", attempt_timeout=TIMEOUT)])
    latest = max(m.version for m in discover_migrations())
    async with migrate.open_connection(dsn) as conn:
        reverted = await migrate.downgrade(conn, schema, to=10)
        assert [m.version for m in reverted] == list(range(latest, 10, -1))
        dropped = await _columns(conn, schema)
        kept = await conn.fetchval(
            f"SELECT count(*) FROM {schema.quoted}.jobs WHERE id = $1", enqueued.job_id
        )
        await migrate.upgrade(conn, schema)
        restored = await _columns(conn, schema)
    assert (dropped, kept) == ([], 1)
    assert restored == [("jobs", "interval"), ("jobs_archive", "interval")]
    [claimed] = await store.claim(
        ClaimRequest(worker_id="w1", queues=["default"], actors=("a",), limit=1, lease=LEASE)
    )
    assert (claimed.id, claimed.attempt_timeout) == (enqueued.job_id, None)
