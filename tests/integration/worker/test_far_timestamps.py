"""Times no driver can load, written by other means than TaskQ, do not crash a worker.

A schedule_to_close past year 9999 in UTC (or 'infinity', or before year 1) inserted by
hand used to fail the whole claim that took it: an asyncpg worker exited 1 on a raw
OverflowError, a psycopg one hung, and every job of that claim was left running.
Claims and reads now clamp those times into years 1..9999.
"""

from __future__ import annotations

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, record
from tests.integration.worker.support import Database, WorkerSpawner, status_counts

from taskq import JobsClient

pytestmark = pytest.mark.integration

BEYOND = ("'10000-01-01 13:59+00'", "'infinity'")
BEFORE = "'0001-01-01 00:00+14'"  # year 0 in UTC: a deadline long passed


async def test_far_deadlines_do_not_crash_the_worker(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    await client.enqueue_many(record, [Item(n=i) for i in range(20)])
    odd = [
        await conn.fetchval(
            f"INSERT INTO {db.schema}.jobs (queue, actor, payload, status, schedule_to_close) "
            f"VALUES ('default', 'record', '{{\"n\": {1000 + i}}}', 'pending', {value}) "
            "RETURNING id"
        )
        for i, value in enumerate((*BEYOND, BEFORE))
    ]
    worker = workers.start(db.worker_env(), "--until-idle", "--idle-max-runtime", "60")
    code = await worker.wait(within=90)
    # No crash, no hang. The passed deadline fails its job either in the leader's sweep
    # or, when this worker claims it first, here: then until-idle reports it (exit 3).
    assert code in (0, 3), worker.output_tail()
    assert await status_counts(conn, db.schema) == {"succeeded": 22, "failed": 1}
    far, infinite, passed = [await client.get(job_id) for job_id in odd]
    assert far is not None
    assert infinite is not None
    assert passed is not None
    assert far.schedule_to_close is not None
    assert far.schedule_to_close.year == 9999
    assert infinite.schedule_to_close == far.schedule_to_close
    assert passed.schedule_to_close is not None
    assert passed.schedule_to_close.year == 1
    assert passed.last_error is not None
    assert "deadline" in passed.last_error.lower()
