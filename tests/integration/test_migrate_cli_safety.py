"""`taskq migrate` (the installed console script) on a schema from a newer release, and
`migrate down` past the migration that holds the jobs: real processes, real Postgres."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from contracts.provision import (
    NoTestDatabase,
    drop_test_schema,
    fresh_schema_name,
    resolve_test_dsn,
)

from taskq.adapters.postgres.migrator import discover_migrations

pytestmark = pytest.mark.integration

LABELS = [m.label for m in discover_migrations()]
#: The console script pip installed beside this interpreter.
TASKQ = Path(sys.executable).with_name("taskq")
NEWER = "9999_from_a_newer_taskq"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


async def taskq(*args: str) -> Run:
    """Run the ``taskq`` console script with no TASKQ_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
    proc = await asyncio.create_subprocess_exec(
        str(TASKQ),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


@pytest.fixture(scope="module")
def dsn() -> str:
    try:
        return resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


@pytest.fixture
async def schema(dsn: str) -> AsyncIterator[str]:
    """A fully migrated schema no one else uses, dropped after the test."""
    if not TASKQ.exists():
        pytest.skip(f"no console script at {TASKQ}")
    name = fresh_schema_name("taskq_cls")
    first = await taskq("migrate", "up", "--dsn", dsn, "--schema", name)
    assert first.code == 0, first.err
    yield name
    await drop_test_schema(dsn, name)


async def execute(dsn: str, sql: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


async def applied_versions(dsn: str, schema: str) -> list[int]:
    rows = await execute(dsn, f"SELECT version FROM {schema}.schema_migrations ORDER BY 1")
    return [int(row["version"]) for row in rows]


async def add_newer_migration(dsn: str, schema: str) -> None:
    """Record a migration this TaskQ has no file for, numbered above all it knows."""
    version, name = NEWER.split("_", 1)
    await execute(
        dsn,
        f"INSERT INTO {schema}.schema_migrations (version, name, checksum) "
        f"VALUES ({int(version)}, '{name}', 'x')",
    )


def assert_warns_newer(run: Run, schema: str) -> None:
    (line,) = run.err.splitlines()
    assert line.startswith(f"taskq: warning: schema {schema} has migration(s) {NEWER} "), line
    assert "newer TaskQ" in line


async def test_up_on_a_schema_from_a_newer_release_warns_and_exits_0(dsn: str, schema: str) -> None:
    """The rollback deploy: the older release's `migrate up` succeeds, names the newer
    migration on stderr and changes nothing (before, it exited 1)."""
    await add_newer_migration(dsn, schema)
    run = await taskq("migrate", "up", "--dsn", dsn, "--schema", schema)
    assert run.code == 0, run.err
    assert run.out.splitlines()[1:] == [f"schema {schema} is up to date: nothing to apply"]
    assert_warns_newer(run, schema)
    assert await applied_versions(dsn, schema) == [m.version for m in discover_migrations()] + [
        9999
    ]


async def test_status_on_a_schema_from_a_newer_release_warns_and_exits_0(
    dsn: str, schema: str
) -> None:
    """`migrate status` lists the newer migration as unknown, warns, and exits 0."""
    await add_newer_migration(dsn, schema)
    run = await taskq("migrate", "status", "--dsn", dsn, "--schema", schema)
    assert run.code == 0, run.err
    rows = [line.split()[:3] for line in run.out.splitlines()[2:]]
    assert rows[-1] == ["9999", "from_a_newer_taskq", "unknown"]
    assert [r[2] for r in rows[:-1]] == ["applied"] * len(LABELS)
    assert_warns_newer(run, schema)


async def test_down_on_a_schema_from_a_newer_release_is_still_refused(
    dsn: str, schema: str
) -> None:
    """Reverting needs the migration files: the older release refuses `down` (exit 1)."""
    await add_newer_migration(dsn, schema)
    run = await taskq("migrate", "down", "--dsn", dsn, "--schema", schema)
    assert run.code == 1
    (line,) = run.err.splitlines()
    assert NEWER in line
    assert "newer TaskQ" in line


async def test_down_to_0_needs_yes_and_reverts_nothing_without_it(dsn: str, schema: str) -> None:
    """`down --to 0` would drop the job tables: without --yes it exits 8 with one line and
    reverts nothing, not even the later migrations; with --yes it reverts everything."""
    await execute(
        dsn,
        f"INSERT INTO {schema}.jobs (queue, actor, status) VALUES ('q', 'a', 'pending')",
    )
    refused = await taskq("migrate", "down", "--to", "0", "--dsn", dsn, "--schema", schema)
    assert refused.code == 8, refused.err
    (line,) = refused.err.splitlines()
    assert line.startswith("taskq: reverting 0001_jobs drops the tables holding jobs"), line
    assert "pass --yes" in line
    assert refused.out.splitlines()[1:] == []
    assert len(await applied_versions(dsn, schema)) == len(LABELS)
    assert len(await execute(dsn, f"SELECT id FROM {schema}.jobs")) == 1

    done = await taskq("migrate", "down", "--to", "0", "--yes", "--dsn", dsn, "--schema", schema)
    assert done.code == 0, done.err
    assert done.out.splitlines()[1:] == [f"reverted {label}" for label in reversed(LABELS)]
    assert await applied_versions(dsn, schema) == []


async def test_down_that_keeps_the_job_tables_needs_no_yes(dsn: str, schema: str) -> None:
    """Reverting down to 0001 drops no job table: no --yes. The plain `down` that would
    then revert 0001 itself needs it, even with the tables empty."""
    kept = await taskq("migrate", "down", "--to", "1", "--dsn", dsn, "--schema", schema)
    assert kept.code == 0, kept.err
    assert await applied_versions(dsn, schema) == [1]

    last = await taskq("migrate", "down", "--dsn", dsn, "--schema", schema)
    assert last.code == 8
    assert "0001_jobs" in last.err
    assert await applied_versions(dsn, schema) == [1]
    confirmed = await taskq("migrate", "down", "--yes", "--dsn", dsn, "--schema", schema)
    assert confirmed.code == 0, confirmed.err
    assert await applied_versions(dsn, schema) == []
