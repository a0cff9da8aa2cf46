"""A worker whose Redis (the rate limiter) stops answering keeps its jobs' leases.

Each heartbeat also extends the worker's reservation leases in Redis. Behind a
silent partition every Redis call waits out the client's socket timeout (5 s,
retried once); that call must not hold up the beats that extend the jobs'
leases in Postgres, or the leader reclaims the running jobs and they run twice.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Nap, nap
from tests.integration.worker.proxy import FaultyProxy
from tests.integration.worker.support import Database, WorkerSpawner, eventually, status_counts

from taskq import JobsClient

pytestmark = pytest.mark.integration

REDIS_URL = os.environ.get("TASKQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
#: How long the job runs after Redis went silent: several 3 s leases, and more than
#: two of the Redis client's 10 s stalls.
NAP_SECONDS = 12.0


@pytest.fixture
async def redis_proxy() -> AsyncIterator[FaultyProxy]:
    """A TCP proxy in front of the test Redis (the shared Redis itself is never touched)."""
    parts = urlsplit(REDIS_URL)
    proxy = FaultyProxy(parts.hostname or "127.0.0.1", parts.port or 6379)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()


async def _runs(conn: asyncpg.Connection, db: Database) -> int:
    return int(await conn.fetchval(f"SELECT count(*) FROM {db.schema}.side_effects"))


async def test_a_silent_redis_does_not_cost_the_running_job_its_lease(
    db: Database,
    conn: asyncpg.Connection,
    client: JobsClient,
    workers: WorkerSpawner,
    redis_proxy: FaultyProxy,
) -> None:
    """Redis blackholed while a job runs under a 3 s lease (beats every 0.5 s): the job
    keeps its lease, runs once and succeeds with its first attempt; each reservation
    extension is given up after TASKQ_HEARTBEAT_COMMAND_TIMEOUT (heartbeat-failed,
    part reservations); nothing is reclaimed and the worker stays up."""
    worker = workers.start(
        db.worker_env(
            TASKQ_REDIS_URL=redis_proxy.dsn_for(REDIS_URL),
            TASKQ_HEARTBEAT_COMMAND_TIMEOUT="1",
        )
    )
    handle = await client.enqueue(nap, Nap(seconds=NAP_SECONDS))
    await eventually(
        lambda: _runs(conn, db), within=30, what="the job to start", context=worker.output_tail
    )
    token = await conn.fetchval(
        f"SELECT fencing_token FROM {db.schema}.jobs WHERE id = $1", handle.job_id
    )
    redis_proxy.blackhole()

    async def finished() -> bool:
        counts = await status_counts(conn, db.schema)
        return counts.get("running", 0) + counts.get("pending", 0) == 0

    await eventually(
        finished, within=NAP_SECONDS + 20, what="the job to end", context=worker.output_tail
    )
    row = await conn.fetchrow(
        f"SELECT status, attempt, fencing_token FROM {db.schema}.jobs WHERE id = $1",
        handle.job_id,
    )
    tail = worker.output_tail(60)
    assert row is not None
    assert (row["status"], row["attempt"], row["fencing_token"]) == ("succeeded", 1, token), tail
    assert await _runs(conn, db) == 1, tail
    assert worker.events("leases-reclaimed") == [], tail
    assert worker.events("worker-watchdog-trip") == [], tail
    failed = worker.events("heartbeat-failed")
    assert failed, tail
    assert {r.get("part") for r in failed} == {"reservations"}, tail
    assert worker.returncode is None, tail
    worker.send(signal.SIGTERM)
    assert await worker.wait(within=30) == 0, worker.output_tail(60)
