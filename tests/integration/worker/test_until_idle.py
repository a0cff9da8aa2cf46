"""``taskq worker --until-idle`` on a real database: drain, then exit 0 or 3."""

from __future__ import annotations

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, fail_always, record
from tests.integration.worker.support import Database, WorkerSpawner, status_counts

from taskq import JobsClient

pytestmark = pytest.mark.integration


async def test_until_idle_exits_zero_when_every_job_succeeds(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """--until-idle drains the queue and exits 0 when no job it ran failed."""
    await client.enqueue_many(record, [Item(n=i) for i in range(20)])
    worker = workers.start(db.worker_env(), "--until-idle", "--idle-max-runtime", "60")
    code = await worker.wait(within=60)
    assert code == 0, worker.output_tail()
    assert await status_counts(conn, db.schema) == {"succeeded": 20}


async def test_until_idle_exits_three_when_a_job_failed(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """--until-idle drains the queue and exits 3 when one job it ran ended failed."""
    await client.enqueue_many(record, [Item(n=i) for i in range(10)])
    await client.enqueue(fail_always, Item(n=99))
    worker = workers.start(db.worker_env(), "--until-idle", "--idle-max-runtime", "60")
    code = await worker.wait(within=60)
    assert code == 3, worker.output_tail()
    assert await status_counts(conn, db.schema) == {"succeeded": 10, "failed": 1}
