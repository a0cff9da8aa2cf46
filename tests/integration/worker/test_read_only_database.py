"""A database that turns read-only for a while (a failover to a standby): an outage, not a crash.

The worker's sessions are made read-only (``default_transaction_read_only`` on
its own role, its connections killed so new ones pick the setting up), as
they are on a standby or during a failover. Every write then fails with
SQLSTATE 25006. The worker must treat that as the database being unavailable
(failed beats, failed claims, retried) and carry on when writes work again;
a client gets ``StoreUnavailable`` saying the server is read-only.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import SIDE_EFFECTS_DSN, Item, record
from tests.integration.worker.roles import DOCUMENTED_GRANTS, as_user, kill_sessions, login_role
from tests.integration.worker.support import (
    Database,
    WorkerSpawner,
    eventually,
    status_counts,
)

from taskq import JobsClient, StoreUnavailable
from taskq.app.settings import TaskQSettings

pytestmark = pytest.mark.integration

JOBS = 20


async def _read_only(conn: asyncpg.Connection, role: str, on: bool) -> None:
    if on:
        await conn.execute(f"ALTER ROLE {role} SET default_transaction_read_only = on")
    else:
        await conn.execute(f"ALTER ROLE {role} RESET default_transaction_read_only")
    await kill_sessions(conn, role)  # new sessions take the role's setting


async def test_a_worker_rides_out_a_read_only_database(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    async with login_role(conn, db.schema, DOCUMENTED_GRANTS) as role:
        role_dsn = as_user(db.dsn, role)
        worker = workers.start(
            db.worker_env(
                TASKQ_PG_DSN=role_dsn,
                # The side-effect rows are the test's evidence: written as the test's user.
                **{SIDE_EFFECTS_DSN: db.dsn},
                TASKQ_MAX_HEARTBEAT_FAILURES="100",
                TASKQ_LOCK_LEASE="60",
                TASKQ_NOTIFY_POLL_INTERVAL="0.5",
            )
        )

        async def succeeded(expected: int) -> bool:
            return await status_counts(conn, db.schema) == {"succeeded": expected}

        await client.enqueue_many(record, [Item(n=n) for n in range(JOBS)])
        await eventually(
            lambda: succeeded(JOBS), within=30, what="the first jobs", context=worker.output_tail
        )

        await _read_only(conn, role, True)
        settings = TaskQSettings.load_from_dict(
            {"pg_dsn": role_dsn, "schema_name": db.schema, "driver": db.driver}
        )
        async with JobsClient.connect(settings=settings) as role_client:
            with pytest.raises(StoreUnavailable, match="read-only") as refused:
                await role_client.enqueue(record, Item(n=-1))
        assert "TaskQ needs the primary" in str(refused.value)
        await client.enqueue_many(record, [Item(n=n) for n in range(JOBS, 2 * JOBS)])
        await asyncio.sleep(3)  # beats, claims and sweeps fail all this while
        assert worker.returncode is None, worker.output_tail()
        assert (await status_counts(conn, db.schema)).get("succeeded") == JOBS
        assert worker.events("heartbeat-failed"), worker.output_tail()

        await _read_only(conn, role, False)
        await eventually(
            lambda: succeeded(2 * JOBS),
            within=60,
            what="the jobs enqueued while the database was read-only",
            context=worker.output_tail,
        )
        assert worker.returncode is None
        runs = await conn.fetch(
            f"SELECT job_id, count(*) AS runs FROM {db.schema}.side_effects GROUP BY job_id"
        )
        assert len(runs) == 2 * JOBS
        assert {row["runs"] for row in runs} == {1}
