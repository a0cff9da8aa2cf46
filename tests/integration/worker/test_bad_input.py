"""Bad input end to end: ``taskq worker`` refuses to start with exit 1 and one clear line."""

from __future__ import annotations

import json

import pytest
from tests.integration.worker.support import ACTORS_MODULE, Database, WorkerProcess, WorkerSpawner

pytestmark = pytest.mark.integration

#: Nothing listens on port 1: connections are refused at once.
UNREACHABLE_DSN = "postgresql://postgres@127.0.0.1:1/test"


def problem_lines(proc: WorkerProcess) -> list[str]:
    """The human-facing ``taskq: ...`` lines on stderr (JSON log records are not counted)."""
    return [line for line in proc.stderr().splitlines() if line.startswith("taskq:")]


def assert_refused(proc: WorkerProcess, code: int, *needles: str) -> str:
    """Exit 1, exactly one ``taskq:`` line mentioning every needle, no traceback anywhere."""
    assert code == 1, proc.output_tail()
    output = proc.stderr() + proc.stdout()
    assert "Traceback" not in output, output
    lines = problem_lines(proc)
    assert len(lines) == 1, output
    for needle in needles:
        assert needle in lines[0], lines[0]
    # Whatever else is on stderr is structured (JSON log records), not stray text.
    for line in proc.stderr().splitlines():
        if line and not line.startswith("taskq:"):
            json.loads(line)
    return lines[0]


async def test_unknown_registry_module_is_refused(db: Database, workers: WorkerSpawner) -> None:
    """--actors naming a module that does not exist exits 1 naming the spec."""
    proc = workers.start(db.worker_env(), registry="nonexistent.module:registry")
    line = assert_refused(proc, await proc.wait(within=30), "nonexistent.module:registry")
    print(line)


async def test_generator_registry_is_refused(db: Database, workers: WorkerSpawner) -> None:
    """--actors naming a generator (a one-shot iterable) exits 1 saying why it is refused."""
    proc = workers.start(db.worker_env(), registry=f"{ACTORS_MODULE}:a_generator")
    line = assert_refused(proc, await proc.wait(within=30), "a_generator", "generator")
    print(line)


async def test_invalid_timing_settings_are_refused(db: Database, workers: WorkerSpawner) -> None:
    """A lease shorter than four heartbeats exits 1 naming both variables."""
    env = db.worker_env(TASKQ_LOCK_LEASE="1", TASKQ_HEARTBEAT_INTERVAL="10")
    proc = workers.start(env)
    line = assert_refused(
        proc, await proc.wait(within=30), "TASKQ_LOCK_LEASE", "TASKQ_HEARTBEAT_INTERVAL"
    )
    print(line)


async def test_unreachable_database_is_refused(db: Database, workers: WorkerSpawner) -> None:
    """A database that refuses connections exits 1 with one line and no traceback."""
    proc = workers.start(db.worker_env(TASKQ_PG_DSN=UNREACHABLE_DSN))
    line = assert_refused(proc, await proc.wait(within=30), "127.0.0.1")
    print(line)


async def test_unmigrated_schema_is_refused(db: Database, workers: WorkerSpawner) -> None:
    """A schema that was never migrated exits 1 with one line that names the missing
    table and says how to migrate, no traceback."""
    proc = workers.start(db.worker_env(TASKQ_SCHEMA_NAME=f"{db.schema}_never_migrated"))
    line = assert_refused(
        proc, await proc.wait(within=30), f"{db.schema}_never_migrated", "taskq migrate up"
    )
    print(line)


async def test_a_dsn_password_never_appears_in_the_refusal(
    db: Database, workers: WorkerSpawner
) -> None:
    """psycopg quoted a password with a bad percent-escape in its error; now scrubbed,
    on stderr and in the JSON log alike."""
    if db.driver != "psycopg":
        pytest.skip("asyncpg takes the escape as it is: with trust auth the worker just runs")
    bad = db.dsn.replace("postgres@", "postgres:s3cret%ZZpw@")
    proc = workers.start(db.worker_env(TASKQ_PG_DSN=bad))
    line = assert_refused(proc, await proc.wait(within=30))
    assert "s3cret" not in proc.stderr() + proc.stdout(), line


async def test_a_malformed_ipv6_dsn_is_refused(db: Database, workers: WorkerSpawner) -> None:
    """An unclosed [ in the host gave a ValueError traceback; now one settings line."""
    proc = workers.start(db.worker_env(TASKQ_PG_DSN="postgresql://u:p@[::1:5432/db"))
    assert_refused(proc, await proc.wait(within=30), "TASKQ_PG_DSN", "Invalid IPv6")
