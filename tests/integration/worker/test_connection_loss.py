"""Dropped connections mid-drain: every job still runs exactly once.

The worker's connections are terminated by the server again and again while it
drains (``pg_terminate_backend``: what a failover, a proxy restart or a killed
session does). Claims and terminal writes are lost before or after their commit;
the worker retries what it can, gives back what it was claimed and never
received, and the fencing token refuses what it no longer owns.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import SIDE_EFFECTS_DSN, Nap, nap
from tests.integration.worker.support import (
    Database,
    WorkerProcess,
    WorkerSpawner,
    eventually,
    status_counts,
)

from taskq import JobsClient

pytestmark = pytest.mark.integration

JOBS = 800
APP = "taskq-victim"


async def test_a_drain_survives_its_connections_being_killed(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """Eight rounds of killed connections during the drain: all jobs succeed, each ran once."""
    separator = "&" if "?" in db.dsn else "?"
    worker = workers.start(
        db.worker_env(
            TASKQ_PG_DSN=f"{db.dsn}{separator}application_name={APP}",
            # The side-effect rows are the test's evidence: not on a connection it kills.
            **{SIDE_EFFECTS_DSN: db.dsn},
            TASKQ_MAX_CONCURRENCY="4",
            TASKQ_NOTIFY_POLL_INTERVAL="0.5",
            # A killed heartbeat connection is a failed beat: never enough to isolate.
            TASKQ_MAX_HEARTBEAT_FAILURES="50",
            # Longer than the outage (as the 60 s default is): jobs whose leases expire
            # while no beat gets through are reclaimed and run again, by design.
            TASKQ_LOCK_LEASE="30",
        )
    )

    async def registered() -> bool:
        return bool(await conn.fetchval(f"SELECT count(*) FROM {db.schema}.workers"))

    await eventually(
        registered, within=30, what="the worker to register", context=worker.output_tail
    )
    handles = await client.enqueue_many(nap, [Nap(seconds=0.02) for _ in range(JOBS)])
    job_ids = {h.job_id for h in handles}

    killed = 0
    for _ in range(8):
        await asyncio.sleep(0.5)
        killed += await conn.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1",
            APP,
        )
    assert killed > 0

    async def all_succeeded() -> bool:
        return await status_counts(conn, db.schema) == {"succeeded": JOBS}

    await eventually(
        all_succeeded, within=120, what=f"{JOBS} jobs to succeed", context=worker.output_tail
    )
    rows = await conn.fetch(
        f"SELECT job_id, count(*) AS runs FROM {db.schema}.side_effects GROUP BY job_id"
    )
    assert {row["job_id"] for row in rows} == job_ids
    twice = [row["job_id"] for row in rows if row["runs"] != 1]
    assert twice == [], _story(worker, await _runs(conn, db.schema, twice))
    assert worker.returncode is None  # still serving


async def _runs(conn: asyncpg.Connection, schema: str, job_ids: list[int]) -> list[str]:
    rows = await conn.fetch(
        f"SELECT job_id, attempt, at FROM {schema}.side_effects "
        "WHERE job_id = ANY($1::bigint[]) ORDER BY id",
        job_ids,
    )
    return [f"run: job {r['job_id']} attempt {r['attempt']} at {r['at']}" for r in rows]


def _story(worker: WorkerProcess, runs: list[str]) -> str:
    """What the worker logged about jobs that ran more than once, and when they ran."""
    ids = {int(line.split()[2]) for line in runs}
    logged = [
        str(record)
        for record in worker.log_records()
        if record.get("job_id") in ids or record.get("level") in {"WARNING", "ERROR"}
    ]
    return "\n".join([*runs, *logged[-80:]])
