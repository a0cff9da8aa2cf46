"""A role or database with idle_session_timeout: TaskQ's idle-by-design sessions stay up.

Postgres 14+ ends a session idle for longer than ``idle_session_timeout``. The
listener sits idle between wake-ups and the leader's connection between
renewals: before, both were ended every few seconds (wake-ups lost until the
next poll, leadership lost and won again), and pooled connections churned.
TaskQ now turns the timeout off on the sessions it opens.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import SIDE_EFFECTS_DSN, Item, record
from tests.integration.worker.roles import DOCUMENTED_GRANTS, as_user, login_role
from tests.integration.worker.support import (
    SLOW_POLLS,
    Database,
    WorkerSpawner,
    eventually,
    wait_until_listening,
)

from taskq import JobsClient

pytestmark = pytest.mark.integration

JOBS = 4


async def test_idle_sessions_outlive_a_short_idle_session_timeout(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    if await conn.fetchval("SELECT current_setting('server_version_num')::int") < 140000:
        pytest.skip("idle_session_timeout needs Postgres 14")
    async with login_role(conn, db.schema, DOCUMENTED_GRANTS) as role:
        await conn.execute(f"ALTER ROLE {role} SET idle_session_timeout = '500ms'")
        worker = workers.start(
            db.worker_env(
                TASKQ_PG_DSN=as_user(db.dsn, role),
                **{SIDE_EFFECTS_DSN: db.dsn},
                **SLOW_POLLS,
                TASKQ_NOTIFY_HEALTH_CHECK_INTERVAL="2",
            )
        )
        await wait_until_listening(conn, db.schema, context=worker.output_tail, role=role)
        for n in range(JOBS):
            await asyncio.sleep(1.5)  # three timeouts' worth of idleness
            handle = await client.enqueue(record, Item(n=n))

            async def done(job_id: int = handle.job_id) -> bool:
                status: str | None = await conn.fetchval(
                    f"SELECT status FROM {db.schema}.jobs WHERE id = $1", job_id
                )
                return status == "succeeded"

            # Far below the 120 s polls: only a live listener starts the job in time.
            await eventually(done, within=5, what=f"job {n}", context=worker.output_tail)
        assert worker.events("notify-listener-lost") == [], worker.output_tail()
        assert worker.events("leader-lock-lost") == [], worker.output_tail()
        assert worker.events("leader-task-failed") == [], worker.output_tail()
