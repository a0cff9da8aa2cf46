"""SIGUSR2 on a real ``taskq worker``: the task dump is logged and the worker goes on."""

from __future__ import annotations

import json
import signal
import sys

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, Nap, nap, record
from tests.integration.worker.support import Database, WorkerSpawner, eventually

from taskq import JobsClient, JobStatus

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform == "win32", reason="no SIGUSR2 on Windows"),
]

#: A payload value the dump must never show (it lists await sites, never values).
SECRET_SECONDS = 3.1415926535


async def test_sigusr2_dumps_every_task_and_the_worker_keeps_working(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """SIGUSR2 logs worker-task-dump (each task's name, coroutine and await site, no
    payload value) and nothing else happens: the worker runs a job enqueued afterwards,
    keeps its workers row, and SIGTERM still ends it with exit 0."""
    worker = workers.start(db.worker_env())
    running = await client.enqueue(nap, Nap(seconds=SECRET_SECONDS, cooperative=False))

    async def started() -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT count(*) FROM {db.schema}.side_effects WHERE job_id = $1",
                running.job_id,
            )
        )

    await eventually(started, within=30, what="the nap to start", context=worker.output_tail)
    worker.send(signal.SIGUSR2)

    async def dumped() -> list[dict[str, object]]:
        return worker.events("worker-task-dump")

    [dump] = await eventually(dumped, within=10, what="the task dump", context=worker.output_tail)
    assert dump["level"] == "WARNING"
    assert dump["trigger"] == "SIGUSR2"
    tasks = dump["tasks"]
    assert isinstance(tasks, list)
    by_name = {task["name"]: task for task in tasks}
    assert "taskq-heartbeat" in by_name, sorted(by_name)
    job_task = by_name[f"taskq-job-{running.job_id}"]
    assert job_task["coroutine"]
    assert any(" in nap" in frame for frame in job_task["frames"]), job_task
    assert all(isinstance(task["frames"], list) for task in tasks)
    assert str(SECRET_SECONDS) not in json.dumps(dump)

    assert worker.returncode is None, worker.output_tail()
    await running.wait(timeout=30)  # the job the dump caught ends as it would have
    after = await client.enqueue(record, Item(n=7))
    assert await after.wait(timeout=30) == 7
    assert await conn.fetchval(f"SELECT count(*) FROM {db.schema}.workers") == 1

    worker.send(signal.SIGTERM)
    assert await worker.wait(within=15) == 0, worker.output_tail()
    assert await conn.fetchval(f"SELECT count(*) FROM {db.schema}.workers") == 0
    assert (await running.status()) is JobStatus.SUCCEEDED
    assert len(worker.events("worker-task-dump")) == 1
