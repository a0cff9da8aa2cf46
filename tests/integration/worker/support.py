"""Shared helpers for the real-process tests: a test schema, worker subprocesses, bounded waits.

Workers are started as an operator would start them (``python -m taskq.app.cli
worker``) with only the ``TASKQ_*`` variables a test gives them, in a temporary
working directory (so no developer ``.env`` leaks in). Their stdout/stderr go
to files, which failing assertions quote.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest
from contracts.provision import (
    NoTestDatabase,
    create_migrated_schema,
    drop_test_schema,
    fresh_schema_name,
    resolve_test_dsn,
)
from tests.integration.worker.actors_fixture import SIDE_EFFECTS_DDL

from taskq import JobsClient
from taskq.adapters.postgres.schema import Schema
from taskq.app.settings import TaskQSettings

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[3]
ACTORS_MODULE = "tests.integration.worker.actors_fixture"
REGISTRY = f"{ACTORS_MODULE}:registry"
DRIVERS = ("asyncpg", "psycopg")

#: Short timings that still satisfy the startup rules: lease 3 >= 4 x 0.5 heartbeat;
#: cancellation 1 + cleanup 1 = 2 < lease 3 and < termination 10 - 5; a beat's command
#: timeout 1 < lease 3.
FAST_WORKER_ENV: Mapping[str, str] = {
    "TASKQ_HEARTBEAT_INTERVAL": "0.5",
    "TASKQ_LOCK_LEASE": "3",
    "TASKQ_HEARTBEAT_COMMAND_TIMEOUT": "1",
    "TASKQ_CANCELLATION_GRACE_PERIOD": "1",
    "TASKQ_CLEANUP_GRACE_PERIOD": "1",
    "TASKQ_TERMINATION_GRACE_PERIOD": "10",
    "TASKQ_HEALTH_ENABLED": "false",
    "TASKQ_LOG_FORMAT": "json",
    # Small pools: several suites may share the test server's 100 connections.
    "TASKQ_DISPATCHER_POOL_SIZE": "2",
    "TASKQ_HEARTBEAT_POOL_SIZE": "1",
    "TASKQ_IDLE_POLL_INTERVAL": "0.2",
    "TASKQ_IDLE_SETTLE_WINDOW": "0.5",
}


def server_dsn_or_skip() -> str:
    """The test server's DSN (``TASKQ_TEST_DSN`` first); skips when there is none."""
    try:
        return resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


@dataclass(frozen=True, slots=True)
class Database:
    """A fresh migrated schema (plus ``side_effects``) on the test server, for one driver."""

    dsn: str
    schema: str
    driver: str

    def settings(self) -> TaskQSettings:
        """Client settings for this schema and driver, independent of the environment."""
        return TaskQSettings.load_from_dict(
            {"pg_dsn": self.dsn, "schema_name": self.schema, "driver": self.driver}
        )

    def worker_env(self, **overrides: str) -> dict[str, str]:
        """The ``TASKQ_*`` variables of a fast worker on this schema, plus ``overrides``."""
        return {
            **FAST_WORKER_ENV,
            "TASKQ_PG_DSN": self.dsn,
            "TASKQ_SCHEMA_NAME": self.schema,
            "TASKQ_DRIVER": self.driver,
            **overrides,
        }


@asynccontextmanager
async def fresh_database(driver: str, prefix: str) -> AsyncIterator[Database]:
    """A fresh schema for one test, with the side-effect table; dropped afterwards."""
    dsn = server_dsn_or_skip()
    schema = fresh_schema_name(prefix)
    await create_migrated_schema(dsn, schema)
    try:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(SIDE_EFFECTS_DDL.format(schema=schema))
        finally:
            await conn.close()
        yield Database(dsn, schema, driver)
    finally:
        await drop_test_schema(dsn, schema)


@asynccontextmanager
async def connected_client(db: Database) -> AsyncIterator[JobsClient]:
    """A client on its own pool for ``db`` (the settings are not read from the environment)."""
    async with JobsClient.connect(settings=db.settings()) as client:
        yield client


def child_env(taskq_vars: Mapping[str, str]) -> dict[str, str]:
    """The test process's environment without its ``TASKQ_*`` variables, plus ``taskq_vars``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
    paths = [str(REPO_ROOT), clean.get("PYTHONPATH", "")]
    return {**clean, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **taskq_vars}


class WorkerProcess:
    """One ``taskq worker`` child process; output goes to files under ``log_dir``."""

    def __init__(self, args: list[str], env: Mapping[str, str], log_dir: Path, name: str) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.stdout_path = log_dir / f"{name}.stdout"
        self.stderr_path = log_dir / f"{name}.stderr"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "taskq.app.cli", *args],
                env=child_env(env),
                cwd=log_dir,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
        self.started = time.monotonic()

    def __repr__(self) -> str:
        return f"<WorkerProcess {self.name} pid={self.pid} returncode={self.returncode}>"

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def log_records(self) -> list[dict[str, Any]]:
        """The worker's JSON log records so far (``TASKQ_LOG_FORMAT=json``, one per line)."""
        records = []
        for line in self.stderr().splitlines():
            if line.startswith("{"):
                records.append(json.loads(line))
        return records

    def events(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.log_records() if r.get("event") == name]

    def error_records(self) -> list[dict[str, Any]]:
        return [r for r in self.log_records() if r.get("level") in {"ERROR", "CRITICAL"}]

    def output_tail(self, lines: int = 40) -> str:
        tail = self.stderr().splitlines()[-lines:]
        return f"--- {self.name} stderr (last {len(tail)} lines) ---\n" + "\n".join(tail)

    def send(self, sig: signal.Signals) -> None:
        self.popen.send_signal(sig)

    async def wait(self, within: float) -> int:
        """The exit code; fails the test (quoting stderr) if it takes over ``within`` s."""
        deadline = time.monotonic() + within
        while (code := self.popen.poll()) is None:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name} still running after {within}s\n{self.output_tail()}"
                )
            await asyncio.sleep(0.05)
        return code

    def kill_if_running(self) -> None:
        """Teardown: SIGKILL a process still alive and reap it."""
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=10)


class WorkerSpawner:
    """Starts workers for a test and kills every leftover one at teardown."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.processes: list[WorkerProcess] = []

    def start(self, env: Mapping[str, str], *args: str, registry: str = REGISTRY) -> WorkerProcess:
        name = f"worker{len(self.processes) + 1}"
        proc = WorkerProcess(["worker", "--actors", registry, *args], env, self.log_dir, name)
        self.processes.append(proc)
        return proc

    def cleanup(self) -> None:
        for proc in self.processes:
            proc.kill_if_running()


async def eventually(
    check: Callable[[], Awaitable[T]],
    *,
    within: float,
    what: str,
    interval: float = 0.05,
    context: Callable[[], str] = lambda: "",
) -> T:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}\n{context()}")
        await asyncio.sleep(interval)


async def status_counts(conn: asyncpg.Connection, schema: str) -> dict[str, int]:
    rows = await conn.fetch(f"SELECT status, count(*) AS n FROM {schema}.jobs GROUP BY status")
    return {row["status"]: row["n"] for row in rows}


async def registered_worker_pids(conn: asyncpg.Connection, schema: str) -> set[int]:
    rows = await conn.fetch(f"SELECT pid FROM {schema}.workers")
    return {row["pid"] for row in rows}


__all__ = [
    "DRIVERS",
    "FAST_WORKER_ENV",
    "REGISTRY",
    "Database",
    "WorkerProcess",
    "WorkerSpawner",
    "child_env",
    "connected_client",
    "eventually",
    "fresh_database",
    "registered_worker_pids",
    "server_dsn_or_skip",
    "status_counts",
]


#: Polls this slow never fire during a test: only a wake-up (NOTIFY) starts a job in time.
SLOW_POLLS: Mapping[str, str] = {
    "TASKQ_POLL_INTERVAL": "120",
    "TASKQ_NOTIFY_POLL_INTERVAL": "120",
}


async def wait_until_listening(
    conn: asyncpg.Connection,
    schema: str,
    *,
    context: Callable[[], str] = lambda: "",
    role: str | None = None,
    besides_pid: int = 0,
) -> None:
    """Wait until a session (of ``role``, when given; not ``besides_pid``) LISTENs on the
    wake channel of ``schema``."""
    channel = Schema(schema).wake_channel

    async def listening() -> bool:
        return bool(
            await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND query ILIKE 'LISTEN %' AND position($1 in query) > 0"
                " AND pid <> $2 AND ($3::text IS NULL OR usename = $3::text)",
                channel,
                besides_pid,
                role,
            )
        )

    await eventually(listening, within=30, what="the worker to LISTEN", context=context)
