"""A ConcurrencyLimit(capacity=1) actor across two real worker processes: never two at once."""

from __future__ import annotations

import itertools

import asyncpg
import pytest
from tests.integration.worker.limits_actors_fixture import LIMIT_SPANS_DDL, Span, gpu_span
from tests.integration.worker.support import (
    Database,
    WorkerSpawner,
    eventually,
    registered_worker_pids,
    status_counts,
)

from taskq import JobsClient

pytestmark = pytest.mark.integration

REGISTRY = "tests.integration.worker.limits_actors_fixture:registry"
JOBS = 6


async def test_a_reserved_actor_never_overlaps_across_two_workers(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """Two workers with two slots each run six gpu jobs: each once, their invocations
    (timed on the database's clock) never overlap, and some starts were denied."""
    await conn.execute(LIMIT_SPANS_DDL.format(schema=db.schema))
    env = db.worker_env(TASKQ_MAX_CONCURRENCY="2")
    first, second = workers.start(env, registry=REGISTRY), workers.start(env, registry=REGISTRY)

    def tails() -> str:
        return first.output_tail() + "\n" + second.output_tail()

    async def both_registered() -> bool:
        return await registered_worker_pids(conn, db.schema) == {first.pid, second.pid}

    await eventually(both_registered, within=30, what="both workers to register", context=tails)
    handles = await client.enqueue_many(gpu_span, [Span(n=n) for n in range(JOBS)])

    async def all_succeeded() -> bool:
        return await status_counts(conn, db.schema) == {"succeeded": JOBS}

    await eventually(all_succeeded, within=90, what=f"{JOBS} jobs to succeed", context=tails)

    spans = await conn.fetch(
        f"SELECT job_id, worker_pid, began, ended FROM {db.schema}.limit_spans ORDER BY began"
    )
    assert {row["job_id"] for row in spans} == {h.job_id for h in handles}
    assert all(row["ended"] is not None for row in spans)
    for before, after in itertools.pairwise(spans):
        assert after["began"] >= before["ended"], (
            f"job {after['job_id']} (pid {after['worker_pid']}) began while job "
            f"{before['job_id']} (pid {before['worker_pid']}) still ran"
        )
    # Contention really happened: jobs were offered while the slot was taken.
    snoozes = await conn.fetchval(
        f"SELECT coalesce(sum((metadata ->> 'snooze_count')::int), 0) FROM {db.schema}.jobs"
    )
    assert snoozes >= 1
    attempts = await conn.fetch(f"SELECT attempt FROM {db.schema}.jobs")
    assert {row["attempt"] for row in attempts} == {1}  # a denial uses no attempt
    pids = {row["worker_pid"] for row in spans}
    print(f"[{db.driver}] {JOBS} gpu jobs, {snoozes} snoozes, run by pids {sorted(pids)}")
    assert pids <= {first.pid, second.pid}
    for worker in (first, second):
        assert worker.returncode is None, worker.output_tail()
        assert worker.error_records() == []
