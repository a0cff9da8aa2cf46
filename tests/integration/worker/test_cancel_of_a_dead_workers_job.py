"""A cancel accepted for a job whose worker then dies is kept: the sweep ends it cancelled."""

from __future__ import annotations

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, block_first
from tests.integration.worker.support import Database, WorkerSpawner, eventually

from taskq import JobsClient, JobStatus

pytestmark = pytest.mark.integration


async def test_a_cancelled_job_of_a_killed_worker_is_not_run_again(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """Cancel after kill -9 (no heartbeat delivers it): the sweep cancels; no attempt 2."""
    victim = workers.start(db.worker_env())
    handle = await client.enqueue(block_first, Item(n=1))

    async def attempt_1_started() -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT count(*) FROM {db.schema}.side_effects WHERE job_id = $1", handle.job_id
            )
        )

    await eventually(attempt_1_started, within=30, what="attempt 1", context=victim.output_tail)
    victim.kill_if_running()  # SIGKILL: the row stays running, nobody heartbeats it
    assert await handle.cancel() is JobStatus.RUNNING  # accepted: cancel_phase 1

    async def lease_expired() -> bool:
        sql = f"SELECT lock_expires_at < now() FROM {db.schema}.jobs WHERE id = $1"
        return bool(await conn.fetchval(sql, handle.job_id))

    await eventually(lease_expired, within=10, what="the dead worker's lease to expire")
    survivor = workers.start(db.worker_env())  # leads at once and sweeps the expired lease

    async def finished() -> JobStatus | None:
        job = await client.get(handle.job_id)
        assert job is not None
        return job.status if job.status is not JobStatus.RUNNING else None

    status = await eventually(finished, within=30, what="the sweep", context=survivor.output_tail)
    assert status is JobStatus.CANCELLED, survivor.output_tail()
    runs = await conn.fetchval(
        f"SELECT count(*) FROM {db.schema}.side_effects WHERE job_id = $1", handle.job_id
    )
    assert runs == 1
    reclaims = survivor.events("leases-reclaimed")
    assert [r["cancelled"] for r in reclaims] == [[handle.job_id]], survivor.output_tail()
    history = await client.store.attempts(handle.job_id)
    assert [(a.attempt, a.outcome) for a in history] == [(1, "lease_expired")]
