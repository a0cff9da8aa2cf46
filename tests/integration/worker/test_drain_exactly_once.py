"""Two worker processes drain thousands of jobs, each run exactly once."""

from __future__ import annotations

import time

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, record
from tests.integration.worker.support import (
    Database,
    WorkerSpawner,
    eventually,
    registered_worker_pids,
    status_counts,
)

from taskq import JobsClient

pytestmark = pytest.mark.integration

JOBS = 3000


async def test_two_workers_run_every_job_exactly_once(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """Two workers sharing a queue run each of 3000 bulk-enqueued jobs once, and both do work."""
    env = db.worker_env()
    first, second = workers.start(env), workers.start(env)
    pids = {first.pid, second.pid}

    async def both_registered() -> bool:
        return await registered_worker_pids(conn, db.schema) == pids

    def tails() -> str:
        return first.output_tail() + "\n" + second.output_tail()

    await eventually(both_registered, within=30, what="both workers to register", context=tails)

    started = time.monotonic()
    handles = await client.enqueue_many(record, [Item(n=i) for i in range(JOBS)])
    job_ids = {h.job_id for h in handles}
    assert len(job_ids) == JOBS

    async def all_succeeded() -> bool:
        return await status_counts(conn, db.schema) == {"succeeded": JOBS}

    await eventually(all_succeeded, within=90, what=f"{JOBS} jobs to succeed", context=tails)
    elapsed = time.monotonic() - started
    print(f"[{db.driver}] {JOBS} jobs drained by 2 workers in {elapsed:.2f}s")

    rows = await conn.fetch(
        f"SELECT job_id, count(*) AS runs, min(attempt) AS first_attempt, "
        f"min(worker_pid) AS pid FROM {db.schema}.side_effects GROUP BY job_id"
    )
    assert {row["job_id"] for row in rows} == job_ids
    assert [row["job_id"] for row in rows if row["runs"] != 1] == []
    assert {row["first_attempt"] for row in rows} == {1}
    per_worker: dict[int, int] = {}
    for row in rows:
        per_worker[row["pid"]] = per_worker.get(row["pid"], 0) + 1
    print(f"[{db.driver}] jobs per worker pid: {per_worker}")
    assert set(per_worker) == pids, "both workers must have run jobs"
    for worker in (first, second):
        assert worker.returncode is None
        assert worker.error_records() == []
