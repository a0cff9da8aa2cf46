"""SIGTERM under load: a clean exit inside the termination grace, and no job left running."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, Nap, hang, nap, stubborn
from tests.integration.worker.support import (
    FAST_WORKER_ENV,
    Database,
    WorkerProcess,
    WorkerSpawner,
    eventually,
)

from taskq import ActorRef, JobHandle, JobsClient, JobStatus

pytestmark = pytest.mark.integration

JOBS = 60
CONCURRENCY = 4
NAP_SECONDS = 0.4


async def test_sigterm_under_load_exits_zero_and_leaves_nothing_running(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """SIGTERM mid-load: exit 0 in the grace; every job ends succeeded or pending, none running."""
    worker = workers.start(db.worker_env(), "--max-concurrency", str(CONCURRENCY))
    # Every other nap ignores the cancel request and just finishes (well inside the grace).
    naps = [Nap(seconds=NAP_SECONDS, cooperative=i % 2 == 0) for i in range(JOBS)]
    handles = await client.enqueue_many(nap, naps)
    job_ids = {h.job_id for h in handles}
    cooperative = {h.job_id for h, p in zip(handles, naps, strict=True) if p.cooperative}

    async def busy() -> bool:
        # Past the first batch, with several jobs executing (not just claimed) right now.
        row = await conn.fetchrow(
            f"SELECT count(*) FILTER (WHERE status = 'succeeded') AS done, "
            f"count(*) FILTER (WHERE status = 'running' AND started_at IS NOT NULL) AS executing "
            f"FROM {db.schema}.jobs"
        )
        assert row is not None
        done: int = row["done"]
        executing: int = row["executing"]
        return done >= CONCURRENCY and executing >= 2

    await eventually(busy, within=30, what="the worker to be busy", context=worker.output_tail)
    sent = time.monotonic()
    worker.send(signal.SIGTERM)
    grace = float(FAST_WORKER_ENV["TASKQ_TERMINATION_GRACE_PERIOD"])
    code = await worker.wait(within=grace)
    took = time.monotonic() - sent
    print(f"[{db.driver}] SIGTERM -> exit {code} in {took:.2f}s")
    assert code == 0, worker.output_tail()
    assert worker.error_records() == []
    # Nothing held the process: it ended on its own, not by the exit guard.
    assert all(r.get("event") != "worker-exit-forced" for r in worker.log_records())

    jobs = await conn.fetch(
        f"SELECT id, status, attempt, started_at FROM {db.schema}.jobs ORDER BY id"
    )
    assert {row["id"] for row in jobs} == job_ids
    by_status: dict[str, set[int]] = {}
    for row in jobs:
        by_status.setdefault(row["status"], set()).add(row["id"])
    print(f"[{db.driver}] after shutdown: { {k: len(v) for k, v in by_status.items()} }")
    assert set(by_status) <= {"succeeded", "pending"}, by_status.keys()

    # Waiting jobs hold no used attempt: never claimed, re-pended unstarted, or stopped
    # cooperatively by the shutdown (rescheduled without using an attempt).
    assert {row["attempt"] for row in jobs if row["status"] == "pending"} <= {0}
    runs = await conn.fetch(
        f"SELECT job_id, count(*) AS runs FROM {db.schema}.side_effects GROUP BY job_id"
    )
    ran = {row["job_id"]: row["runs"] for row in runs}
    assert all(ran.get(job_id) == 1 for job_id in by_status["succeeded"])
    assert all(count == 1 for count in ran.values())
    # A waiting job that had started was stopped cooperatively by the shutdown and put
    # back with a WorkerShutdown attempt record; one that never started (never claimed,
    # or re-pended unstarted) has no history at all.
    interrupted = 0
    for job_id in by_status.get("pending", set()):
        history = await client.store.attempts(job_id)
        expected = ["WorkerShutdown"] if job_id in ran else []
        assert not expected or job_id in cooperative, "only a cooperative nap stops early"
        assert [a.error_class for a in history] == expected, (job_id, history)
        interrupted += bool(expected)
    print(f"[{db.driver}] interrupted cooperatively: {interrupted}")
    assert await conn.fetchval(f"SELECT count(*) FROM {db.schema}.workers") == 0


async def _sigterm_once_started(
    db: Database,
    conn: asyncpg.Connection,
    client: JobsClient,
    workers: WorkerSpawner,
    ref: ActorRef[Item, None],
) -> tuple[WorkerProcess, JobHandle[None], int]:
    """A worker runs one job of ``ref``; once it started, SIGTERM. The worker, the
    job's handle, and the exit code (within the termination grace)."""
    worker = workers.start(db.worker_env(), "--max-concurrency", str(CONCURRENCY))
    handle = await client.enqueue(ref, Item(n=1))

    async def started() -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT count(*) FROM {db.schema}.side_effects WHERE job_id = $1", handle.job_id
            )
        )

    await eventually(started, within=30, what="the job to start", context=worker.output_tail)
    worker.send(signal.SIGTERM)
    grace = float(FAST_WORKER_ENV["TASKQ_TERMINATION_GRACE_PERIOD"])
    return worker, handle, await worker.wait(within=grace)


async def _handed_back_after_the_old_process(
    client: JobsClient, handle: JobHandle[None], signalled: datetime
) -> None:
    """The job waits again as the same attempt, due no sooner than the old process's
    termination deadline plus the exit guard's grace, with an interrupted attempt."""
    job = await client.get(handle.job_id)
    assert job is not None
    assert (job.status, job.attempt) == (JobStatus.SCHEDULED, 0)
    grace = float(FAST_WORKER_ENV["TASKQ_TERMINATION_GRACE_PERIOD"])
    assert job.scheduled_at >= signalled + timedelta(seconds=grace)
    [attempt] = await client.attempts(handle.job_id)
    assert (attempt.outcome, attempt.error_class) == ("interrupted", "WorkerShutdown")


async def test_sigterm_with_a_hung_sync_job_still_ends_the_process(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """A plain def job stuck for good (it never returns, never checks its cancel request):
    SIGTERM interrupts it after the grace periods and the process exits 0 within the
    termination grace; the thread still running it does not keep the process alive. The
    job waits again, attempt not counted, due only once that process has surely ended."""
    signalled = datetime.now(UTC)
    worker, handle, code = await _sigterm_once_started(db, conn, client, workers, hang)
    assert code == 0, worker.output_tail()
    await _handed_back_after_the_old_process(client, handle, signalled)


async def test_sigterm_with_an_async_job_that_ignores_cancellation_still_ends_the_process(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """An async job that swallows every cancellation keeps its task pending, which would
    hold the event loop's close forever: the job is handed back (waiting again, due once
    the old process has surely ended), and the process exits with the worker's code
    within the termination grace, saying it forced the exit."""
    signalled = datetime.now(UTC)
    worker, handle, code = await _sigterm_once_started(db, conn, client, workers, stubborn)
    assert code == 0, worker.output_tail()
    await _handed_back_after_the_old_process(client, handle, signalled)
    forced = [r for r in worker.log_records() if r.get("event") == "worker-exit-forced"]
    assert len(forced) == 1, worker.output_tail()
    assert forced[0]["jobs"] == [handle.job_id], forced  # it names the job it leaves behind


async def test_sighup_shuts_down_gracefully_like_sigterm(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """SIGHUP (a closed terminal) killed the worker (exit 129) leaving its claimed jobs
    running until their leases expired and its workers row behind; now it drains."""
    worker = workers.start(db.worker_env())
    # Shorter than the 1 s cancellation grace, even on a loaded machine.
    handle = await client.enqueue(nap, Nap(seconds=0.3, cooperative=False))

    async def running() -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT count(*) FROM {db.schema}.jobs WHERE status = 'running'"
                " AND started_at IS NOT NULL"
            )
        )

    await eventually(running, within=30, what="the job to start", context=worker.output_tail)
    worker.send(signal.SIGHUP)
    assert await worker.wait(within=10) == 0, worker.output_tail()
    job = await client.get(handle.job_id)
    assert job is not None
    assert job.status is JobStatus.SUCCEEDED
    assert await conn.fetchval(f"SELECT count(*) FROM {db.schema}.workers") == 0
