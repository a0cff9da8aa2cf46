"""Time-driven paths on a real worker: retry backoff and scheduled jobs."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import FLAKY_RETRY, FLAKY_SUCCEEDS_ON, Item, flaky
from tests.integration.worker.actors_fixture import record as record_actor
from tests.integration.worker.support import Database, WorkerSpawner

from taskq import JobsClient, JobStatus

pytestmark = pytest.mark.integration


async def test_retries_are_rescheduled_with_backoff(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """An actor failing twice succeeds on attempt 3; no retry starts before its backoff."""
    worker = workers.start(db.worker_env())
    handle = await client.enqueue(flaky, Item(n=7))
    try:
        assert await handle.wait(timeout=30) == FLAKY_SUCCEEDS_ON
    except TimeoutError:
        raise AssertionError(worker.output_tail()) from None

    history = await client.store.attempts(handle.job_id)
    assert [a.attempt for a in history] == [1, 2, 3]
    assert [a.error_class for a in history] == ["RuntimeError", "RuntimeError", None]
    assert history[-1].outcome == "succeeded"

    # The failed attempts have job_attempts rows; the succeeded one is the job row itself.
    starts = await conn.fetch(
        f"SELECT attempt, started_at, finished_at FROM {db.schema}.job_attempts "
        f"WHERE job_id = $1 UNION ALL SELECT attempt, started_at, finished_at "
        f"FROM {db.schema}.jobs WHERE id = $1 AND status = 'succeeded' ORDER BY attempt",
        handle.job_id,
    )
    assert [row["attempt"] for row in starts] == [1, 2, 3]
    assert all(row["started_at"] is not None for row in starts)
    for retry, (before, after) in enumerate(itertools.pairwise(starts), start=1):
        backoff = FLAKY_RETRY.base * 2 ** (retry - 1)  # 200 ms, then 400 ms (no jitter)
        gap = after["started_at"] - before["started_at"]
        wait_after_failure = after["started_at"] - before["finished_at"]
        print(f"[{db.driver}] attempt {retry} -> {retry + 1}: start gap {gap}, backoff {backoff}")
        assert gap >= backoff
        assert wait_after_failure >= backoff


async def test_scheduled_job_waits_for_its_time(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """A job scheduled 2 s ahead is stored scheduled, starts no earlier than that, and completes."""
    worker = workers.start(db.worker_env())
    scheduled_at = datetime.now(UTC) + timedelta(seconds=2)
    handle = await client.enqueue(record_actor, Item(n=3), scheduled_at=scheduled_at)
    assert await handle.status() is JobStatus.SCHEDULED
    try:
        assert await handle.wait(timeout=30) == 3
    except TimeoutError:
        raise AssertionError(worker.output_tail()) from None

    job = await client.get(handle.job_id)
    assert job is not None
    assert job.started_at is not None
    assert job.scheduled_at == scheduled_at
    assert job.started_at >= scheduled_at
    ran_at = await conn.fetchval(
        f"SELECT at FROM {db.schema}.side_effects WHERE job_id = $1", handle.job_id
    )
    assert ran_at >= scheduled_at
    print(f"[{db.driver}] scheduled job started {job.started_at - scheduled_at} after its time")
