"""A real worker stops attempts at their timeout and keeps running its other jobs."""

from __future__ import annotations

import signal

import asyncpg
import pytest
from tests.integration.worker.support import Database, WorkerSpawner, eventually
from tests.integration.worker.timeout_actors_fixture import Item, hangs, healthy, ignores

from taskq import JobsClient, JobStatus

pytestmark = pytest.mark.integration

REGISTRY = "tests.integration.worker.timeout_actors_fixture:registry"


async def test_timed_out_jobs_fail_with_attempt_timeout_and_healthy_ones_succeed(
    db: Database, client: JobsClient, workers: WorkerSpawner, conn: asyncpg.Connection
) -> None:
    """A sync actor hung in its thread and an async actor deaf to its cancel event, both
    with a 1 s timeout, end failed with AttemptTimeout in every attempt of their history
    (the sync one retried once by its policy); healthy jobs on the same worker succeed,
    before and after, the worker stays up, and SIGTERM still stops it promptly (the hung
    thread does not hold the process)."""
    worker = workers.start(db.worker_env(TASKQ_MAX_CONCURRENCY="4"), registry=REGISTRY)
    hung = await client.enqueue(hangs, Item(n=0))
    deaf = await client.enqueue(ignores, Item(n=0))
    before = [await client.enqueue(healthy, Item(n=i)) for i in range(5)]

    async def ended() -> bool:
        failed = [await h.status() for h in (hung, deaf)]
        succeeded = [await h.status() for h in before]
        return failed == [JobStatus.FAILED] * 2 and succeeded == [JobStatus.SUCCEEDED] * 5

    await eventually(
        ended, within=30, what="the timed-out jobs to fail", context=worker.output_tail
    )
    assert worker.returncode is None, worker.output_tail()

    hung_history = await client.attempts(hung.job_id)
    assert [(a.outcome, a.error_class) for a in hung_history] == [
        ("retried", "AttemptTimeout"),
        ("failed", "AttemptTimeout"),
    ]
    assert all("stopped waiting for it" in (a.error or "") for a in hung_history)
    deaf_history = await client.attempts(deaf.job_id)
    assert [(a.outcome, a.error_class) for a in deaf_history] == [("failed", "AttemptTimeout")]
    assert "its task was cancelled" in (deaf_history[0].error or "")

    after = [await client.enqueue(healthy, Item(n=10 + i)) for i in range(5)]

    async def ran() -> bool:
        return [await h.status() for h in after] == [JobStatus.SUCCEEDED] * 5

    await eventually(ran, within=15, what="jobs enqueued afterwards", context=worker.output_tail)
    assert [(await h.get()).result for h in after] == [10, 11, 12, 13, 14]
    events = {r["event"] for r in worker.log_records()}
    assert {"job-timed-out", "job-timeout-forced", "job-timeout-abandoned"} <= events

    worker.send(signal.SIGTERM)
    assert await worker.wait(within=15) == 0, worker.output_tail()
    assert "worker-exit-forced" not in {r["event"] for r in worker.log_records()}
