"""`taskq migrate` as an operator runs it: real processes against a real Postgres."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from contracts.provision import (
    NoTestDatabase,
    drop_test_schema,
    fresh_schema_name,
    resolve_test_dsn,
)
from tests.integration.worker.roles import as_user

from taskq.adapters.postgres.dsn import dsn_location as location
from taskq.adapters.postgres.migrator import discover_migrations

pytestmark = pytest.mark.integration

ALL_TABLES = {
    "jobs",
    "jobs_archive",
    "job_attempts",
    "workers",
    "maintenance_leader",
    "actor_config",
    "queues",
    "reservation_slots",
    "rate_limit_windows",
    "schema_migrations",
}
TABLES_UP_TO_2 = {"jobs", "jobs_archive", "job_attempts", "workers", "maintenance_leader"}
LABELS = [m.label for m in discover_migrations()]


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


async def taskq(*args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Run:
    """Run ``taskq`` in a child process with no TASKQ_* variables except ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
    if cwd is not None:  # the child must still import the tests' taskq
        clean["PYTHONPATH"] = os.pathsep.join([*sys.path[1:], clean.get("PYTHONPATH", "")])
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "taskq.app.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**clean, **(env or {})},
        cwd=cwd,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


@pytest.fixture(scope="module")
def dsn() -> str:
    """The test server's DSN; the module is skipped when there is none."""
    try:
        return resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


@pytest.fixture
async def schema(dsn: str) -> AsyncIterator[str]:
    """A schema name no one uses yet, dropped after the test."""
    name = fresh_schema_name("taskq_cli")
    yield name
    await drop_test_schema(dsn, name)


async def fetch(dsn: str, sql: str, *args: object) -> list[Any]:
    """Rows of one query on a fresh connection."""
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def catalog(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """Tables, columns, indexes, constraints and migration rows of ``schema``."""
    columns = await fetch(
        dsn,
        """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
           WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'r'
             AND a.attnum > 0 AND NOT a.attisdropped
           ORDER BY c.relname, a.attnum""",
        schema,
    )
    indexes = await fetch(
        dsn,
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY 1",
        schema,
    )
    constraints = await fetch(
        dsn,
        """SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
           WHERE connamespace = $1::regnamespace ORDER BY 1""",
        schema,
    )
    tables = {r[0] for r in columns}
    migrations = (
        await fetch(
            dsn, f'SELECT version, name, checksum FROM "{schema}".schema_migrations ORDER BY 1'
        )
        if "schema_migrations" in tables
        else []
    )
    return {
        "tables": sorted((t,) for t in tables),
        "columns": [tuple(r) for r in columns],
        "indexes": [tuple(r) for r in indexes],
        "constraints": [tuple(r) for r in constraints],
        "migrations": [tuple(r) for r in migrations],
    }


def tables(snapshot: Mapping[str, list[tuple[Any, ...]]]) -> set[str]:
    return {t for (t,) in snapshot["tables"]}


def free_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_up_twice_gives_one_complete_schema(dsn: str, schema: str) -> None:
    """`up` creates every table and index once; a second `up` changes nothing."""
    first = await taskq("migrate", "up", "--dsn", dsn, "--schema", schema)
    assert first.code == 0, first.err
    assert first.out.splitlines()[1:] == [f"applied {label}" for label in LABELS]
    before = await catalog(dsn, schema)

    second = await taskq("migrate", "up", "--dsn", dsn, "--schema", schema)
    assert second.code == 0, second.err
    assert "up to date" in second.out
    assert await catalog(dsn, schema) == before

    assert tables(before) == ALL_TABLES
    assert [(v, n) for v, n, _ in before["migrations"]] == [
        (m.version, m.name) for m in discover_migrations()
    ]
    assert [c for _, _, c in before["migrations"]] == [m.checksum for m in discover_migrations()]
    indexes = dict(before["indexes"])
    dispatch = indexes["jobs_dispatch_idx"]
    assert "WHERE (((status)::text = 'pending'::text) AND (queue IS NOT NULL))" in dispatch
    assert "'__null__'::text))::integer), priority DESC, scheduled_at, id)" in dispatch
    assert "'__null__'::text) <> '__null__'::text))" in indexes["jobs_cohort_idx"]  # keyed only
    assert "UNIQUE" in indexes["jobs_identity_key_uidx"]


async def test_archive_has_every_jobs_column_and_jobs_has_fillfactor(dsn: str, schema: str) -> None:
    """jobs_archive holds every jobs column with the same type; jobs leaves room for HOT."""
    assert (await taskq("migrate", "up", "--dsn", dsn, "--schema", schema)).code == 0
    snap = await catalog(dsn, schema)
    jobs = {(col, typ) for t, col, typ, _ in snap["columns"] if t == "jobs"}
    archive = {(col, typ) for t, col, typ, _ in snap["columns"] if t == "jobs_archive"}
    assert jobs <= archive
    assert {col for col, _ in archive - jobs} == {"archived_at", "expire_at"}
    (row,) = await fetch(
        dsn,
        "SELECT reloptions FROM pg_class"
        " WHERE relname = 'jobs' AND relnamespace = $1::regnamespace",
        schema,
    )
    assert "fillfactor=80" in row[0]


async def test_three_concurrent_ups_build_one_schema(dsn: str, schema: str) -> None:
    """Three processes running `up` at once all succeed and apply each migration once."""
    runs = await asyncio.gather(
        *(taskq("migrate", "up", "--dsn", dsn, "--schema", schema) for _ in range(3))
    )
    assert [r.code for r in runs] == [0, 0, 0], [r.err for r in runs]
    applied_lines = sorted(line for r in runs for line in r.out.splitlines() if "applied" in line)
    assert applied_lines == sorted(f"applied {label}" for label in LABELS)
    snap = await catalog(dsn, schema)
    assert tables(snap) == ALL_TABLES
    assert len(snap["migrations"]) == len(LABELS)


async def test_status_lists_applied_and_pending(dsn: str, schema: str) -> None:
    """`status` reads without creating anything and shows each migration's state."""
    fresh = await taskq("migrate", "status", "--dsn", dsn, "--schema", schema)
    assert fresh.code == 0, fresh.err
    lines = fresh.out.splitlines()
    assert lines[0] == f"schema {schema} in database {dsn.rpartition('/')[2]} at {location(dsn)}"
    assert lines[1].split() == ["VERSION", "NAME", "STATE", "APPLIED", "AT"]
    assert [line.split()[2] for line in lines[2:]] == ["pending"] * len(LABELS)
    assert await fetch(dsn, "SELECT 1 FROM pg_namespace WHERE nspname = $1", schema) == []

    assert (
        await taskq("migrate", "up", "--target", "2", "--dsn", dsn, "--schema", schema)
    ).code == 0
    later = await taskq("migrate", "status", "--dsn", dsn, "--schema", schema)
    assert later.code == 0, later.err
    rows = [line.split() for line in later.out.splitlines()[2:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (label[:4], label[5:], "applied" if i < 2 else "pending") for i, label in enumerate(LABELS)
    ]
    assert all(r[3] != "-" for r in rows[:2])
    assert all(r[3] == "-" for r in rows[2:])


async def test_down_then_up_restores_the_same_schema(dsn: str, schema: str) -> None:
    """`down` reverts newest first (one by default, all with --to 0); `up` rebuilds the same."""
    assert (await taskq("migrate", "up", "--dsn", dsn, "--schema", schema)).code == 0
    before = await catalog(dsn, schema)

    one = await taskq("migrate", "down", "--dsn", dsn, "--schema", schema)
    assert one.code == 0, one.err
    assert one.out.splitlines()[1:] == [f"reverted {LABELS[-1]}"]

    rest = await taskq("migrate", "down", "--to", "0", "--yes", "--dsn", dsn, "--schema", schema)
    assert rest.code == 0, rest.err
    assert rest.out.splitlines()[1:] == [f"reverted {label}" for label in reversed(LABELS[:-1])]
    emptied = await catalog(dsn, schema)
    assert tables(emptied) == {"schema_migrations"}
    assert emptied["migrations"] == []

    assert (await taskq("migrate", "up", "--dsn", dsn, "--schema", schema)).code == 0
    assert await catalog(dsn, schema) == before


async def test_target_stops_at_the_given_version(dsn: str, schema: str) -> None:
    """`up --target 2` applies 0001 and 0002 only; a later `up` applies the rest."""
    partial = await taskq("migrate", "up", "--target", "2", "--dsn", dsn, "--schema", schema)
    assert partial.code == 0, partial.err
    assert partial.out.splitlines()[1:] == [f"applied {label}" for label in LABELS[:2]]
    assert tables(await catalog(dsn, schema)) == TABLES_UP_TO_2 | {"schema_migrations"}

    rest = await taskq("migrate", "up", "--dsn", dsn, "--schema", schema)
    assert rest.out.splitlines()[1:] == [f"applied {label}" for label in LABELS[2:]]

    down = await taskq("migrate", "down", "--to", "2", "--dsn", dsn, "--schema", schema)
    assert down.out.splitlines()[1:] == [f"reverted {label}" for label in reversed(LABELS[2:])]
    assert tables(await catalog(dsn, schema)) == TABLES_UP_TO_2 | {"schema_migrations"}


async def test_changed_checksum_is_refused_naming_the_file(dsn: str, schema: str) -> None:
    """An applied migration whose file no longer matches stops up, down and status."""
    assert (
        await taskq("migrate", "up", "--target", "2", "--dsn", dsn, "--schema", schema)
    ).code == 0
    await fetch(
        dsn, f"UPDATE \"{schema}\".schema_migrations SET checksum = 'feed' WHERE version = 2"
    )
    before = await catalog(dsn, schema)

    for command in (["up"], ["down", "--to", "0"], ["status"]):
        run = await taskq("migrate", *command, "--dsn", dsn, "--schema", schema)
        assert run.code == 1, command
        (line,) = run.err.splitlines()
        assert line.startswith("taskq: migration file 0002_workers.up.sql was changed"), line
        assert "Traceback" not in run.err
    assert await catalog(dsn, schema) == before


@pytest.mark.parametrize("command", [["up"], ["down"], ["status"]])
async def test_unreachable_database_prints_one_line_and_exits_1(command: list[str]) -> None:
    """A closed port gives exit 1 and one line naming host and port, no traceback."""
    port = free_port()
    run = await taskq("migrate", *command, "--dsn", f"postgresql://u:secret@127.0.0.1:{port}/db")
    assert run.code == 1
    assert run.err == f"taskq: cannot connect to Postgres at 127.0.0.1:{port}: connection refused\n"
    assert run.out == f"schema taskq in database db at 127.0.0.1:{port}\n"


async def test_invalid_schema_name_prints_one_line_and_exits_1() -> None:
    """A schema name that is not a plain identifier is refused before connecting."""
    run = await taskq(
        "migrate",
        "up",
        "--dsn",
        f"postgresql://127.0.0.1:{free_port()}/db",
        env={"TASKQ_SCHEMA_NAME": 'x"; drop table y; --'},
    )
    assert run.code == 1
    (line,) = run.err.splitlines()
    assert line.startswith(
        "taskq: invalid settings: TASKQ_SCHEMA_NAME: schema name 'x\"; drop table y; --' is not"
    )


async def test_dsn_comes_from_the_environment_and_the_flag_overrides_it(
    dsn: str, schema: str
) -> None:
    """TASKQ_PG_DSN is used when --dsn is absent; --dsn wins over it."""
    from_env = await taskq("migrate", "up", env={"TASKQ_PG_DSN": dsn, "TASKQ_SCHEMA_NAME": schema})
    assert from_env.code == 0, from_env.err
    assert len(from_env.out.splitlines()) == 1 + len(LABELS)

    closed = f"postgresql://127.0.0.1:{free_port()}/db"
    overridden = await taskq(
        "migrate", "status", "--dsn", dsn, env={"TASKQ_PG_DSN": closed, "TASKQ_SCHEMA_NAME": schema}
    )
    assert overridden.code == 0, overridden.err
    assert "applied" in overridden.out


async def test_a_roles_statement_timeout_does_not_cut_a_migration_off(
    dsn: str, schema: str
) -> None:
    """A statement_timeout meant for application queries (here 1 ms, on the role) used to
    cancel a migration halfway, reported as a lost connection; migrate sessions turn it off
    (lock waits stay bounded by each migration's lock_timeout)."""
    admin = await asyncpg.connect(dsn)
    role = f"taskq_cli_{os.getpid()}"
    try:
        await admin.execute(
            f"CREATE ROLE {role} LOGIN SUPERUSER; ALTER ROLE {role} SET statement_timeout = '1ms'"
        )
        role_dsn = as_user(dsn, role)
        up = await taskq("migrate", "up", "--dsn", role_dsn, "--schema", schema)
        assert up.code == 0, up.err
        status = await taskq("migrate", "status", "--dsn", role_dsn, "--schema", schema)
        assert status.code == 0, status.err
        assert "up to date" in status.out or "pending" not in status.out
        applied = await admin.fetchval(f'SELECT count(*) FROM "{schema}".schema_migrations')
        assert applied == len(discover_migrations())
    finally:
        if await admin.fetchval("SELECT count(*) FROM pg_roles WHERE rolname = $1", role):
            await admin.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")
        await admin.close()
