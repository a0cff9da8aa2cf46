"""A worker checks its schema's migrations: behind refuses (exit 1), ahead warns and runs."""

from __future__ import annotations

import asyncpg
import pytest
from contracts.provision import create_migrated_schema, drop_test_schema, fresh_schema_name
from tests.integration.worker.support import (
    Database,
    WorkerSpawner,
    eventually,
    registered_worker_pids,
)
from tests.integration.worker.test_bad_input import assert_refused

from taskq.adapters.asyncpg import migrate
from taskq.adapters.postgres.migrator import discover_migrations
from taskq.adapters.postgres.schema import Schema

pytestmark = pytest.mark.integration


async def test_schema_behind_the_code_is_refused(db: Database, workers: WorkerSpawner) -> None:
    """A schema migrated only to 0007 exits 1 at once, naming both versions and the fix
    (before, the worker ran and every claim failed, forever)."""
    schema = fresh_schema_name("taskq_old")
    await create_migrated_schema(db.dsn, schema, target=7)
    try:
        proc = workers.start(db.worker_env(TASKQ_SCHEMA_NAME=schema), "--until-idle")
        latest = f"{max(m.version for m in discover_migrations()):04d}"
        line = assert_refused(
            proc, await proc.wait(within=30), schema, "0007", latest, "taskq migrate up"
        )
        print(line)
    finally:
        await drop_test_schema(db.dsn, schema)


async def test_schema_ahead_of_the_code_warns_and_runs(
    db: Database, workers: WorkerSpawner, conn: asyncpg.Connection
) -> None:
    """A migration this TaskQ does not know (a newer TaskQ applied it) is a WARNING; the
    worker runs (migrations only add, so a rolling deploy keeps older workers going)."""
    await conn.execute(
        f"INSERT INTO {db.schema}.schema_migrations (version, name, checksum) "
        "VALUES (9999, 'from_the_future', 'x')"
    )
    proc = workers.start(db.worker_env(), "--until-idle")
    assert await proc.wait(within=60) == 0, proc.output_tail()
    ahead = proc.events("worker-schema-ahead")
    assert len(ahead) == 1, proc.output_tail()
    assert "9999" in ahead[0]["note"], ahead


async def test_schema_migrated_down_under_a_running_worker_stops_it(
    db: Database, workers: WorkerSpawner, conn: asyncpg.Connection
) -> None:
    """Migrating down under a running worker makes its claims fail with SchemaNotMigrated:
    it stops (exit 1, one line) instead of retrying every few seconds forever."""
    proc = workers.start(db.worker_env(TASKQ_NOTIFY_POLL_INTERVAL="0.5"))

    async def registered() -> bool:
        return proc.pid in await registered_worker_pids(conn, db.schema)

    await eventually(registered, within=30, what="the worker registers", context=proc.output_tail)
    async with migrate.open_connection(db.dsn) as mconn:
        await migrate.downgrade(mconn, Schema(db.schema), to=7)
    line = assert_refused(proc, await proc.wait(within=30), "taskq migrate up")
    print(line)
    assert await registered_worker_pids(conn, db.schema) == set()
