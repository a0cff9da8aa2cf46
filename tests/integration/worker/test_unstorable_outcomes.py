"""An outcome no store can keep fails its own job, in a real worker on Postgres.

A NaN result and an error text holding a lone surrogate, among hundreds of jobs whose
terminal writes share round trips with theirs: before, the first made the batch's
write fail for every job in it (left running, to be run again after their leases),
and the second could not be written at all.
"""

from __future__ import annotations

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import (
    Item,
    nan_result,
    oversized_result,
    record,
    undecodable_error,
)
from tests.integration.worker.support import Database, WorkerSpawner, status_counts

from taskq import JobsClient

pytestmark = pytest.mark.integration


async def test_unstorable_outcomes_fail_their_own_jobs_and_every_other_job_runs_once(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    good = await client.enqueue_many(record, [Item(n=i) for i in range(300)])
    nan = [(await client.enqueue(nan_result, Item(n=i))).job_id for i in range(3)]
    odd = [(await client.enqueue(undecodable_error, Item(n=i))).job_id for i in range(3)]
    await client.enqueue_many(record, [Item(n=i) for i in range(300, 600)])

    worker = workers.start(db.worker_env(), "--until-idle", "--idle-max-runtime", "60")
    code = await worker.wait(within=90)
    assert code == 3, worker.output_tail()  # some failed; none left over
    assert await status_counts(conn, db.schema) == {"succeeded": 600, "failed": 6}
    runs = await conn.fetch(
        f"SELECT job_id, count(*) AS n FROM {db.schema}.side_effects GROUP BY job_id"
    )
    assert len(runs) == 606
    assert {r["n"] for r in runs} == {1}  # each job ran once
    rows = {
        r["id"]: r["last_error"]
        for r in await conn.fetch(
            f"SELECT id, last_error FROM {db.schema}.jobs WHERE status = 'failed'"
        )
    }
    for job_id in nan:
        assert "result['value'] is nan (JSON has no NaN or infinity)" in rows[job_id]
    for job_id in odd:
        assert "OSError: cannot open caf\\udce9.txt" in rows[job_id]
    assert good[0].job_id not in rows
    assert worker.events("job-write-failed") == []


# One driver: the translation is the drivers' shared sqlstate_error (unit-tested), and
# psycopg adapts a 270 MB text[] parameter in Python, about 50 s of this test's time.
@pytest.mark.parametrize("driver", ["asyncpg"])
async def test_a_result_past_a_server_limit_fails_its_job_once(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """A result only the server finds too big (jsonb holds at most 255 MB): before, the
    server's ProgramLimitExceeded was no store error, so the write was retried forever,
    the job stayed running (exit 4 at the max runtime) and ran again after its lease."""
    await client.enqueue_many(record, [Item(n=i) for i in range(20)])
    big = (await client.enqueue(oversized_result, Item(n=0))).job_id
    # The default lease: sending 270 MB and having it refused twice (the batch, then the
    # write alone) takes longer than the fast tests' 3 s lease.
    worker = workers.start(
        db.worker_env(TASKQ_LOCK_LEASE="60"), "--until-idle", "--idle-max-runtime", "60"
    )
    assert await worker.wait(within=90) == 3, worker.output_tail()
    assert await status_counts(conn, db.schema) == {"succeeded": 20, "failed": 1}
    error = await conn.fetchval(f"SELECT last_error FROM {db.schema}.jobs WHERE id = $1", big)
    assert error.startswith(
        "the job's outcome (succeeded) could not be stored: ValueError: Postgres cannot "
        "store a value: total size of jsonb array elements exceeds the maximum"
    ), error
    runs = await conn.fetchval(
        f"SELECT count(*) FROM {db.schema}.side_effects WHERE job_id = $1", big
    )
    assert runs == 1
