"""A stop or a crash is never worse for a job than a crash: real workers, both drivers.

A graceful stop interrupts a job that ignores its cancel event: a retryable one
waits again with its attempt not counted and another worker runs it to success;
a non_retryable one is never run a second time. After kill -9, jobs the worker
had claimed ahead but never started keep their attempt and run once, a
non_retryable one included; one that started never runs twice.
"""

from __future__ import annotations

import signal

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import (
    Item,
    block_first_run,
    block_first_run_once,
    record_once,
)
from tests.integration.worker.support import (
    FAST_WORKER_ENV,
    Database,
    WorkerProcess,
    WorkerSpawner,
    eventually,
)

from taskq import ActorRef, JobsClient, JobStatus

pytestmark = pytest.mark.integration

GRACE = float(FAST_WORKER_ENV["TASKQ_TERMINATION_GRACE_PERIOD"])


async def _runs(conn: asyncpg.Connection, db: Database, job_id: int) -> int:
    runs: int = await conn.fetchval(
        f"SELECT count(*) FROM {db.schema}.side_effects WHERE job_id = $1", job_id
    )
    return runs


async def _started(
    conn: asyncpg.Connection, db: Database, job_id: int, worker: WorkerProcess
) -> None:
    async def ran() -> bool:
        return await _runs(conn, db, job_id) > 0

    await eventually(ran, within=30, what=f"job {job_id} to start", context=worker.output_tail)


async def _stop_during_first_run(
    db: Database,
    conn: asyncpg.Connection,
    client: JobsClient,
    workers: WorkerSpawner,
    ref: ActorRef[Item, int],
) -> int:
    """A worker starts ``ref``'s job, whose first run ignores its cancel event; SIGTERM;
    the worker exits 0 within its termination grace. The job's id."""
    worker = workers.start(db.worker_env())
    handle = await client.enqueue(ref, Item(n=1))
    await _started(conn, db, handle.job_id, worker)
    worker.send(signal.SIGTERM)
    assert await worker.wait(within=GRACE) == 0, worker.output_tail()
    assert worker.error_records() == [] or ref.retry.kind == "non_retryable"
    return handle.job_id


async def test_sigterm_interrupts_a_deaf_job_and_another_worker_runs_it(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """A retryable job that ignores its cancel event is not ended by a deploy: it waits
    again as the same attempt, its interrupted attempt in the history, and the next
    worker runs it to success."""
    job_id = await _stop_during_first_run(db, conn, client, workers, block_first_run)
    job = await client.get(job_id)
    assert job is not None
    assert (job.status, job.attempt) == (JobStatus.PENDING, 0)
    [interrupted] = await client.attempts(job_id)
    assert (interrupted.outcome, interrupted.error_class) == ("interrupted", "WorkerShutdown")
    assert interrupted.error is not None
    assert "task was cancelled" in interrupted.error

    workers.start(db.worker_env())
    assert await client.handle(block_first_run, job_id).wait(timeout=30) == 1
    assert await _runs(conn, db, job_id) == 2
    history = await client.attempts(job_id)
    assert [(a.attempt, a.outcome) for a in history] == [(1, "interrupted"), (1, "succeeded")]


async def test_sigterm_never_runs_a_non_retryable_job_twice(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """A non_retryable job that ignores its cancel event ends abandoned at a deploy, never
    cancelled, and no later worker runs it again."""
    job_id = await _stop_during_first_run(db, conn, client, workers, block_first_run_once)
    job = await client.get(job_id)
    assert job is not None
    assert job.status is JobStatus.ABANDONED
    [interrupted] = await client.attempts(job_id)
    assert (interrupted.outcome, interrupted.error_class) == ("interrupted", "WorkerShutdown")

    later = workers.start(db.worker_env())
    marker = await client.enqueue(record_once, Item(n=2))
    assert await marker.wait(timeout=30) == 2  # the later worker is up and running jobs
    assert await _runs(conn, db, job_id) == 1
    assert later.returncode is None


async def test_kill9_with_claimed_ahead_non_retryable_jobs_runs_each_once(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """kill -9 of a worker running two non_retryable jobs with two more claimed ahead: the
    two it started end crashed (never run twice); the two it never started keep their
    attempt and run once on the next worker, and so do the jobs it never claimed."""
    victim = workers.start(db.worker_env(), "--max-concurrency", "2")
    blockers = [await client.enqueue(block_first_run_once, Item(n=n)) for n in range(2)]
    for handle in blockers:
        await _started(conn, db, handle.job_id, victim)
    numbers = range(10, 16)
    queued = [await client.enqueue(record_once, Item(n=n)) for n in numbers]

    async def claimed_ahead() -> list[int]:
        rows = await conn.fetch(
            f"SELECT id FROM {db.schema}.jobs WHERE status = 'running' AND started_at IS NULL"
        )
        return [row["id"] for row in rows]

    ahead = await eventually(
        claimed_ahead, within=30, what="jobs claimed ahead", context=victim.output_tail
    )
    victim.kill_if_running()
    assert victim.returncode == -9

    workers.start(db.worker_env())
    for n, handle in zip(numbers, queued, strict=True):
        assert await handle.wait(timeout=30) == n
        assert await _runs(conn, db, handle.job_id) == 1
        job = await client.get(handle.job_id)
        assert job is not None
        assert job.attempt == 1
    for job_id in ahead:
        # The dead worker's claim of it was no attempt: nothing recorded for it.
        assert [a.outcome for a in await client.attempts(job_id)] == ["succeeded"]

    async def crashed() -> bool:
        jobs = [await client.get(h.job_id) for h in blockers]
        return all(j is not None and j.status is JobStatus.CRASHED for j in jobs)

    await eventually(crashed, within=30, what="the started blockers to end crashed")
    for handle in blockers:
        assert await _runs(conn, db, handle.job_id) == 1
