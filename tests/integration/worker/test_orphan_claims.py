"""A claim that committed but whose reply never reached the worker (a dropped connection).

The rows are running and locked by the worker, which knows nothing of them, and
its heartbeat extends every lease it owns: without help they would wait for as
long as the worker lives. The worker gives them back and runs them, once.
"""

from __future__ import annotations

import json
import signal

import asyncpg
import pytest
from tests.integration.worker.support import Database, WorkerSpawner, eventually

from taskq import JobsClient

pytestmark = pytest.mark.integration


async def test_a_job_claimed_for_a_worker_that_never_got_it_runs_once(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """A row left running under a live worker's id, unstarted, is released and then run."""
    worker = workers.start(db.worker_env(TASKQ_NOTIFY_POLL_INTERVAL="0.5"))

    async def worker_id() -> str | None:
        value = await conn.fetchval(f"SELECT worker_id FROM {db.schema}.workers LIMIT 1")
        return str(value) if value is not None else None

    owner = await eventually(
        worker_id, within=30, what="the worker to register", context=worker.output_tail
    )
    # Exactly what a committed claim leaves behind: running, attempt 1, leased to the worker.
    job_id = await conn.fetchval(
        f"INSERT INTO {db.schema}.jobs (queue, actor, payload, status, locked_by, "
        "lock_expires_at, attempt, fencing_token) "
        "VALUES ('default', 'record', $1::jsonb, 'running', $2, now() + interval '3 seconds', "
        "1, 1) RETURNING id",
        json.dumps({"n": 7}),
        owner,
    )

    async def succeeded() -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT status = 'succeeded' FROM {db.schema}.jobs WHERE id = $1", job_id
            )
        )

    await eventually(succeeded, within=30, what="the orphan to run", context=worker.output_tail)
    ran = await conn.fetch(
        f"SELECT attempt FROM {db.schema}.side_effects WHERE job_id = $1", job_id
    )
    assert [r["attempt"] for r in ran] == [1]  # once, on the attempt the release refunded
    history = await client.store.attempts(job_id)
    assert [(a.outcome, a.worker_id) for a in history] == [
        ("released", owner),
        ("succeeded", owner),
    ]
    [released] = worker.events("job-orphan-released")
    assert released["job_id"] == job_id
    worker.send(signal.SIGTERM)
    assert await worker.wait(within=30) == 0
