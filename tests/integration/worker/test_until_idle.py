"""``taskq worker --until-idle`` on a real database: drain, then exit 0 or 3; exit 5 when only
jobs no worker can run are left."""

from __future__ import annotations

import time

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, fail_always, record
from tests.integration.worker.support import Database, WorkerSpawner, status_counts

from taskq import JobsClient, actor

pytestmark = pytest.mark.integration


@actor
async def ghost(payload: Item) -> None:
    """An actor the worker's registry does not hold (never registered anywhere)."""


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


async def test_until_idle_exits_five_when_only_unrunnable_jobs_are_left(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """--until-idle runs the jobs it can, then exits 5 promptly (not at --idle-max-runtime)
    with a stderr line naming the actor, queue and count of the jobs no worker can run."""
    await client.enqueue_many(record, [Item(n=i) for i in range(5)])
    for n in range(2):
        await client.enqueue(ghost, Item(n=n))
    started = time.monotonic()
    worker = workers.start(db.worker_env(), "--until-idle", "--idle-max-runtime", "60")
    code = await worker.wait(within=30)
    assert code == 5, worker.output_tail()
    assert time.monotonic() - started < 20, worker.output_tail()
    assert await status_counts(conn, db.schema) == {"succeeded": 5, "pending": 2}
    [stranded] = worker.events("until-idle-stranded")
    assert stranded["stranded"] == [
        {"actor": "ghost", "queue": "default", "waiting": 2, "reason": "unregistered"}
    ]
    [line] = [x for x in worker.stderr().splitlines() if x.startswith("taskq: until-idle")]
    assert "actor 'ghost' on queue 'default': 2 waiting" in line
    assert not worker.events("until-idle-max-runtime")
