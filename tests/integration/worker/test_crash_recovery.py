"""kill -9 of a worker mid-job: the lease expires, a new leader reclaims, the old lease is dead."""

from __future__ import annotations

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, block_first
from tests.integration.worker.support import Database, WorkerSpawner, eventually

from taskq import JobsClient, JobStatus, LeaseLost
from taskq.app import composition
from taskq.domain.job import Lease
from taskq.ports.store_params import Finish

pytestmark = pytest.mark.integration


async def test_killed_workers_job_is_reclaimed_and_its_late_write_is_fenced(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """A SIGKILLed worker's job completes on attempt 2 after the sweep; its old lease is refused."""
    victim = workers.start(db.worker_env())
    handle = await client.enqueue(block_first, Item(n=1))
    job_id = handle.job_id

    async def first_attempt_running() -> asyncpg.Record | None:
        return await conn.fetchrow(
            f"SELECT j.fencing_token, j.locked_by, s.worker_pid FROM {db.schema}.jobs j "
            f"JOIN {db.schema}.side_effects s ON s.job_id = j.id AND s.attempt = 1 "
            f"WHERE j.id = $1 AND j.status = 'running' AND j.attempt = 1",
            job_id,
        )

    running = await eventually(
        first_attempt_running,
        within=30,
        what="attempt 1 to start",
        context=victim.output_tail,
    )
    assert running is not None
    assert running["worker_pid"] == victim.pid
    old_lease = Lease(job_id, running["fencing_token"])

    victim.kill_if_running()  # SIGKILL: no shutdown, no release, the row stays running
    assert victim.returncode == -9

    async def lease_expired() -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT status = 'running' AND lock_expires_at < now() "
                f"FROM {db.schema}.jobs WHERE id = $1",
                job_id,
            )
        )

    await eventually(lease_expired, within=10, what="the dead worker's lease to expire")

    # A new worker is elected leader at start and sweeps at once: that reclaims the job.
    survivor = workers.start(db.worker_env())
    assert await handle.wait(timeout=30) == 2

    job = await client.get(job_id)
    assert job is not None
    assert job.status is JobStatus.SUCCEEDED
    assert job.attempt == 2
    assert job.fencing_token != old_lease.fencing_token
    runs = await conn.fetch(
        f"SELECT attempt, worker_pid FROM {db.schema}.side_effects WHERE job_id = $1 "
        f"ORDER BY attempt",
        job_id,
    )
    assert [(r["attempt"], r["worker_pid"]) for r in runs] == [
        (1, victim.pid),
        (2, survivor.pid),
    ]
    reclaims = survivor.events("leases-reclaimed")
    assert [r["repended"] for r in reclaims] == [[job_id]], survivor.output_tail()
    history = await client.store.attempts(job_id)
    assert [a.attempt for a in history] == [1, 2]
    assert history[-1].outcome == "succeeded"

    before = await conn.fetchrow(f"SELECT * FROM {db.schema}.jobs WHERE id = $1", job_id)
    attempts_before = await conn.fetchval(
        f"SELECT count(*) FROM {db.schema}.job_attempts WHERE job_id = $1", job_id
    )
    store = await composition.open_store(db.settings())
    try:
        with pytest.raises(LeaseLost):
            # The dead worker's write, as if it had woken up: same job, old fencing token.
            await store.finish(
                Finish(lease=old_lease, status=JobStatus.FAILED, error="late", error_class="X")
            )
    finally:
        await store.close()
    after = await conn.fetchrow(f"SELECT * FROM {db.schema}.jobs WHERE id = $1", job_id)
    assert before is not None
    assert after is not None
    assert dict(after) == dict(before)
    assert (
        await conn.fetchval(
            f"SELECT count(*) FROM {db.schema}.job_attempts WHERE job_id = $1", job_id
        )
        == attempts_before
    )
