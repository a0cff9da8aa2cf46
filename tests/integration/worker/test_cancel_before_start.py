"""A cancel sent while a job waits, claimed, in a worker's queue: it never starts.

With one consumer busy, the worker claims the next job ahead into its local
queue; the job is running in the database but not started. A cancel then only
marks it. The worker's next heartbeat takes it out of the queue and gives it
back unrun, and it ends cancelled; before, the worker started it a moment later
and it could end succeeded.
"""

from __future__ import annotations

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, Nap, nap, record
from tests.integration.worker.support import Database, WorkerSpawner, eventually

from taskq import JobsClient, JobStatus

pytestmark = pytest.mark.integration


async def test_a_job_cancelled_in_the_local_queue_ends_cancelled_unrun(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """One consumer naps 8 s; the record job claimed behind it is cancelled: it ends
    cancelled within a few heartbeats, never ran, and the worker logged
    job-cancel-requested with its id, actor and queue; the nap succeeds."""
    worker = workers.start(db.worker_env(TASKQ_MAX_CONCURRENCY="1"))
    first = await client.enqueue(nap, Nap(seconds=8))

    async def first_running() -> bool:
        return bool(await conn.fetchval(f"SELECT count(*) FROM {db.schema}.side_effects"))

    await eventually(first_running, within=30, what="the nap to start", context=worker.output_tail)
    queued = await client.enqueue(record, Item(n=7))

    async def claimed_unstarted() -> bool:
        row = await conn.fetchrow(
            f"SELECT status, started_at FROM {db.schema}.jobs WHERE id = $1", queued.job_id
        )
        return row is not None and row["status"] == "running" and row["started_at"] is None

    await eventually(
        claimed_unstarted, within=10, what="the job to be claimed ahead", context=worker.output_tail
    )
    assert await client.cancel(queued.job_id) is JobStatus.RUNNING

    async def ended() -> bool:
        status = await conn.fetchval(
            f"SELECT status FROM {db.schema}.jobs WHERE id = $1", queued.job_id
        )
        return bool(status != "running")

    await eventually(ended, within=4, what="the cancelled job to end", context=worker.output_tail)
    tail = worker.output_tail(60)
    got = await client.get(queued.job_id)
    assert got is not None
    assert got.status is JobStatus.CANCELLED, tail
    runs = await conn.fetchval(
        f"SELECT count(*) FROM {db.schema}.side_effects WHERE job_id = $1", queued.job_id
    )
    assert runs == 0, tail
    asked = [r for r in worker.events("job-cancel-requested") if r["job_id"] == queued.job_id]
    assert [(r["actor"], r["queue"]) for r in asked] == [("record", "default")], tail
    assert (
        await conn.fetchval(f"SELECT status FROM {db.schema}.jobs WHERE id = $1", first.job_id)
    ) == "running", tail  # ended before the nap did

    async def nap_succeeded() -> bool:
        status = await conn.fetchval(
            f"SELECT status FROM {db.schema}.jobs WHERE id = $1", first.job_id
        )
        return bool(status == "succeeded")

    await eventually(
        nap_succeeded, within=20, what="the nap to succeed", context=worker.output_tail
    )
    assert worker.error_records() == [], worker.output_tail(60)
