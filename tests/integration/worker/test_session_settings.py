"""Session settings a role or database may carry change nothing TaskQ reads or writes.

A database set up for people, not programs, may give sessions a non-ISO
DateStyle, another IntervalStyle, a far-off TimeZone or a non-UTF8
client_encoding. psycopg reads text results by the first two, and encodes
by the last: before, a psycopg client's get() raised NotImplementedError
("can't parse timestamptz with DateStyle 'SQL, DMY'"), a claim crashed the
worker's producer (exit 1, the job left running), and a payload holding a
character outside LATIN1 failed as if the database could not store it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from psycopg_pool import AsyncConnectionPool
from tests.integration.worker.actors_fixture import SIDE_EFFECTS_DSN, Item, record
from tests.integration.worker.roles import DOCUMENTED_GRANTS, as_user, login_role
from tests.integration.worker.support import Database, WorkerSpawner, status_counts

from taskq import ConfigurationError, JobsClient
from taskq.app.settings import TaskQSettings

pytestmark = pytest.mark.integration

SESSION_SETTINGS = (
    "DateStyle = 'SQL, DMY'",
    "IntervalStyle = 'sql_standard'",
    "TimeZone = 'Pacific/Chatham'",
    "client_encoding = 'LATIN1'",
)
JOBS = 30


async def test_a_role_with_unusual_session_settings_changes_nothing(
    db: Database, conn: asyncpg.Connection, workers: WorkerSpawner
) -> None:
    async with login_role(conn, db.schema, DOCUMENTED_GRANTS) as role:
        for setting in SESSION_SETTINGS:
            await conn.execute(f"ALTER ROLE {role} SET {setting}")
        role_dsn = as_user(db.dsn, role)
        settings = TaskQSettings.load_from_dict(
            {"pg_dsn": role_dsn, "schema_name": db.schema, "driver": db.driver}
        )
        due = datetime.now(UTC) + timedelta(seconds=1)
        async with JobsClient.connect(settings=settings) as client:
            handle = await client.enqueue(
                record,
                Item(n=0),
                scheduled_at=due,
                metadata={"city": "Kraków", "word": "漢字"},
            )
            job = await client.get(handle.job_id)
            assert job is not None
            assert job.scheduled_at == due
            assert job.metadata == {"city": "Kraków", "word": "漢字"}
            await client.enqueue_many(record, [Item(n=n) for n in range(1, JOBS)])
        worker = workers.start(
            db.worker_env(TASKQ_PG_DSN=role_dsn, **{SIDE_EFFECTS_DSN: db.dsn}), "--until-idle"
        )
        assert await worker.wait(within=90) == 0, worker.output_tail()
        assert await status_counts(conn, db.schema) == {"succeeded": JOBS}


@pytest.mark.parametrize("driver", ["psycopg"])
async def test_a_callers_psycopg_pool_that_is_not_utf8_is_refused_by_name(db: Database) -> None:
    """TaskQ cannot change a caller's connections: it names the setting to change."""
    pool = AsyncConnectionPool(
        db.dsn, min_size=1, max_size=1, kwargs={"client_encoding": "latin1"}, open=False
    )
    await pool.open(wait=True)
    try:
        client = JobsClient.from_psycopg_pool(pool, schema=db.schema)
        refused = r"client_encoding 'iso8859-1'; TaskQ needs UTF8"
        with pytest.raises(ConfigurationError, match=refused):
            await client.enqueue(record, Item(n=1))
        await client.aclose()
    finally:
        await pool.close()
