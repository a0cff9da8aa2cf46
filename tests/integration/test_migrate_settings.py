"""`taskq migrate` finds its database as the worker does, and refuses what the worker refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.integration.test_migrate_cli import dsn, fetch, free_port, schema, taskq

from taskq.adapters.postgres.migrator import discover_migrations

pytestmark = pytest.mark.integration
__all__ = ["dsn", "schema"]  # fixtures, imported for this module's tests


async def schema_exists(dsn: str, name: str) -> bool:
    return bool(await fetch(dsn, "SELECT 1 FROM pg_namespace WHERE nspname = $1", name))


async def test_dot_env_is_read_as_the_worker_reads_it(
    dsn: str, schema: str, tmp_path: Path
) -> None:
    """TASKQ_PG_DSN and TASKQ_SCHEMA_NAME from .env are used (before, the built-in
    default DSN and schema taskq were); --schema still wins over it."""
    (tmp_path / ".env").write_text(f"TASKQ_PG_DSN={dsn}\nTASKQ_SCHEMA_NAME={schema}_not\n")
    run = await taskq("migrate", "up", "--schema", schema, cwd=tmp_path)
    assert run.code == 0, run.err
    assert run.out.splitlines()[0] == f"schema {schema} in database test at 127.0.0.1:5432"
    applied = await fetch(dsn, f"SELECT count(*) FROM {schema}.schema_migrations")
    assert applied[0][0] == len(discover_migrations())
    assert not await schema_exists(dsn, f"{schema}_not")


@pytest.mark.parametrize("variable", ["TASKQ_PG_DSN", "TASKQ_SCHEMA_NAME"])
async def test_an_empty_variable_is_refused(variable: str) -> None:
    """An exported but empty DSN or schema is refused, naming it, as the worker refuses it
    (before, migrate quietly used the defaults)."""
    run = await taskq("migrate", "status", env={variable: ""})
    assert run.code == 1
    (line,) = run.err.splitlines()
    if variable == "TASKQ_PG_DSN":  # empty is unset, and no DSN is built in
        assert line.startswith("taskq: TASKQ_PG_DSN is not set: "), line
    else:
        assert line.startswith(f"taskq: invalid settings: {variable}: "), line


@pytest.mark.parametrize(
    ("dsn_flag", "needle"),
    [("", "--dsn: must be a postgresql://"), ("postgresql://u:p@[::1:5432/db", "Invalid IPv6")],
)
async def test_a_bad_dsn_flag_is_refused_before_connecting(dsn_flag: str, needle: str) -> None:
    """`--dsn ''` used to connect through libpq's defaults (a unix socket, database root)
    and migrate there; a malformed IPv6 host gave a traceback. Both are one line, exit 1."""
    run = await taskq("migrate", "up", "--dsn", dsn_flag)
    assert run.code == 1
    assert run.out == ""
    (line,) = run.err.splitlines()
    assert needle in line, line


async def test_an_unknown_target_creates_nothing(dsn: str, schema: str) -> None:
    """`--target 99` is refused before the schema and its schema_migrations are created."""
    run = await taskq("migrate", "up", "--target", "99", "--dsn", dsn, "--schema", schema)
    assert run.code == 1
    assert "not a known migration version" in run.err
    assert not await schema_exists(dsn, schema)


async def test_a_password_never_appears_in_an_error() -> None:
    """A bad percent-escape in the password used to be quoted by the driver's error."""
    port = free_port()
    run = await taskq(
        "migrate", "status", "--dsn", f"postgresql://u:s3cret%ZZpw@127.0.0.1:{port}/db"
    )
    assert run.code == 1
    assert "s3cret" not in run.err + run.out, run.err
