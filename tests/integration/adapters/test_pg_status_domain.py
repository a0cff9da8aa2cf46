"""Migration 0006: job statuses are checked by a domain (cached per connection), not by
table CHECK constraints (rebuilt for every statement)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from contracts.provision import migrated_schema, resolve_test_dsn

from taskq.adapters.postgres.schema import Schema

pytestmark = pytest.mark.integration


@pytest.fixture
async def schema() -> AsyncIterator[Schema]:
    async with migrated_schema(dsn=resolve_test_dsn(), prefix="taskq_status") as provisioned:
        yield Schema(provisioned.schema)


async def test_a_status_outside_the_lifecycle_is_refused(schema: Schema) -> None:
    """Insert and update alike: the domain's check names the value's type."""
    conn = await asyncpg.connect(resolve_test_dsn())
    try:
        jobs = f"{schema.quoted}.jobs"
        with pytest.raises(asyncpg.CheckViolationError, match="job_status"):
            await conn.execute(
                f"INSERT INTO {jobs} (queue, actor, status) VALUES ('q', 'a', 'done')"
            )
        job_id = await conn.fetchval(
            f"INSERT INTO {jobs} (queue, actor, status) VALUES ('q', 'a', 'pending') RETURNING id"
        )
        with pytest.raises(asyncpg.CheckViolationError, match="job_status"):
            await conn.execute(f"UPDATE {jobs} SET status = 'runing' WHERE id = $1", job_id)
        assert await conn.fetchval(f"SELECT status FROM {jobs} WHERE id = $1", job_id) == "pending"
        checks = await conn.fetchval(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'",
            jobs,
        )
        assert checks == 0  # none left for every statement to rebuild
    finally:
        await conn.close()
