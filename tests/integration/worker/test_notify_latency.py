"""NOTIFY wakes an idle worker: jobs start in milliseconds although the polls are minutes apart."""

from __future__ import annotations

import asyncio
import statistics

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, record
from tests.integration.worker.support import Database, WorkerSpawner, eventually

from taskq import JobsClient
from taskq.adapters.postgres.schema import Schema

pytestmark = pytest.mark.integration

JOBS = 20
#: Polls this slow never fire during the test: only a NOTIFY can start a job in time.
SLOW_POLL = "120"


async def test_notify_starts_jobs_on_an_idle_worker_without_polling(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """With 120 s polls, jobs enqueued one by one start within well under a second (NOTIFY)."""
    worker = workers.start(
        db.worker_env(
            TASKQ_POLL_INTERVAL=SLOW_POLL,
            TASKQ_NOTIFY_POLL_INTERVAL=SLOW_POLL,
            # No health ping either, so the listener session's last statement stays its LISTEN.
            TASKQ_NOTIFY_HEALTH_CHECK_INTERVAL=SLOW_POLL,
        )
    )
    channel = Schema(db.schema).wake_channel

    async def listening() -> bool:
        return bool(
            await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query ILIKE 'LISTEN %' "
                "AND position($1 in query) > 0",
                channel,
            )
        )

    await eventually(listening, within=30, what="the worker to LISTEN", context=worker.output_tail)

    for n in range(JOBS):
        handle = await client.enqueue(record, Item(n=n))

        async def done(job_id: int = handle.job_id) -> bool:
            status: str | None = await conn.fetchval(
                f"SELECT status FROM {db.schema}.jobs WHERE id = $1", job_id
            )
            return status == "succeeded"

        # 10 s is far below the 120 s poll: a pass here already means NOTIFY worked.
        await eventually(done, within=10, what=f"job {n} to succeed", context=worker.output_tail)
        await asyncio.sleep(0.05)  # let the worker go idle again before the next enqueue

    rows = await conn.fetch(
        f"SELECT extract(epoch FROM started_at - created_at) AS latency "
        f"FROM {db.schema}.jobs ORDER BY id"
    )
    latencies = sorted(float(row["latency"]) for row in rows)
    assert len(latencies) == JOBS
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    print(
        f"[{db.driver}] enqueue->start over {JOBS} jobs: p50 {p50 * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms"
    )
    assert p50 < 1.0
