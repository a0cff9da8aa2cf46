"""An application's lock on a running job's row does not stall the worker's heartbeat.

The docs allow an application to lock a job's row (``SELECT ... FOR UPDATE`` in its
own transaction). While it holds the lock the heartbeat goes on: it reports the job
(not lost), extends every other job's lease, and extends the locked one's at the
first beat after the lock ends. Before, the heartbeat waited for the lock, failed
and isolated the worker, interrupting every job it ran.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Nap, nap
from tests.integration.worker.support import Database, WorkerSpawner, eventually, status_counts

from taskq import JobsClient

pytestmark = pytest.mark.integration

#: Held for half the 3 s lease: the lease it could not extend meanwhile still holds.
LOCK_SECONDS = 1.5


async def test_a_row_lock_held_for_less_than_the_lease_changes_nothing(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """Two jobs run; one's row is locked FOR UPDATE by another session for 1.5 s (beats
    every 0.5 s, each bounded to 0.5 s): no worker session ever waits for that lock,
    the worker stays up, both jobs run once and succeed with their first attempt.

    Waiting is read from ``pg_blocking_pids`` while the lock is held rather than from
    ``heartbeat-failed`` events: on a loaded CI machine a 0.5 s bound can be missed for
    reasons that have nothing to do with the lock."""
    worker = workers.start(db.worker_env(TASKQ_HEARTBEAT_COMMAND_TIMEOUT="0.5"))
    locked, _ = await client.enqueue_many(nap, [Nap(seconds=6), Nap(seconds=6)])

    async def both_started() -> bool:
        count = await conn.fetchval(f"SELECT count(*) FROM {db.schema}.side_effects")
        return bool(count == 2)

    await eventually(both_started, within=30, what="both jobs to start", context=worker.output_tail)
    app = await asyncpg.connect(db.dsn)
    try:
        async with app.transaction():
            await app.execute(
                f"SELECT 1 FROM {db.schema}.jobs WHERE id = $1 FOR UPDATE", locked.job_id
            )
            blocked = await sessions_blocked_by(conn, app.get_server_pid(), LOCK_SECONDS)
    finally:
        await app.close()

    async def both_succeeded() -> bool:
        return await status_counts(conn, db.schema) == {"succeeded": 2}

    await eventually(
        both_succeeded, within=30, what="both jobs to succeed", context=worker.output_tail
    )
    tail = worker.output_tail(60)
    rows = await conn.fetch(f"SELECT attempt FROM {db.schema}.jobs ORDER BY id")
    assert [row["attempt"] for row in rows] == [1, 1], tail
    runs = await conn.fetchval(f"SELECT count(*) FROM {db.schema}.side_effects")
    assert runs == 2, tail
    assert blocked == [], (blocked, tail)
    for event in ("worker-isolated", "job-lease-lost", "leases-reclaimed"):
        assert worker.events(event) == [], (event, tail)
    assert worker.returncode is None, tail


async def sessions_blocked_by(conn: asyncpg.Connection, pid: int, seconds: float) -> list[str]:
    """Sample, for ``seconds``, the statements of sessions waiting on ``pid``'s locks."""
    seen: list[str] = []
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        rows = await conn.fetch(
            "SELECT query FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", pid
        )
        seen.extend(row["query"] for row in rows if row["query"] not in seen)
        await asyncio.sleep(0.05)
    return seen
