"""``taskq workgroup start``: a supervisor of real ``taskq worker`` processes on real Postgres.

Each test runs the supervisor as an operator would (``python -m taskq.app.cli workgroup
start FILE``) and watches its children through the ``workers`` table and ``/proc``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from tests.integration.worker.support import (
    REGISTRY,
    Database,
    WorkerProcess,
    child_env,
    eventually,
)

pytestmark = pytest.mark.timeout(90)

HEALTHY = f"""
actors = "{REGISTRY}"

[restart]
max_restarts = 5
window = 60
delay = 0.2

[[workers]]
name = "api"
queues = ["default"]
max_concurrency = 2

[[workers]]
name = "media"
queues = ["media"]
max_concurrency = 1
"""


@pytest.fixture
def supervisors(tmp_path: Path) -> Iterator[list[WorkerProcess]]:
    """Supervisors a test starts; any left running are SIGKILLed, with their children."""
    started: list[WorkerProcess] = []
    yield started
    for proc in started:
        children = child_pids(proc.pid)
        proc.kill_if_running()
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def start(
    supervisors: list[WorkerProcess], db: Database, tmp_path: Path, toml: str, **env: str
) -> WorkerProcess:
    path = tmp_path / "workgroup.toml"
    path.write_text(toml)
    proc = WorkerProcess(
        ["workgroup", "start", str(path)], db.worker_env(**env), tmp_path / "logs", "supervisor"
    )
    supervisors.append(proc)
    return proc


def child_pids(parent: int) -> list[int]:
    """The live processes whose parent is ``parent`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == parent and fields[0] != "Z":
                found.append(int(entry.name))
    return found


async def _exist(*paths: Path) -> bool:
    return all(path.exists() for path in paths)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def rows(conn: asyncpg.Connection, db: Database) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            f"SELECT pid, worker_label, workgroup_instance, queues FROM {db.schema}.workers"
        )
    )


async def live_rows(conn: asyncpg.Connection, db: Database, count: int) -> list[asyncpg.Record]:
    """Wait for ``count`` registered workers whose processes are alive."""

    async def check() -> list[asyncpg.Record]:
        found = [r for r in await rows(conn, db) if alive(r["pid"])]
        return found if len(found) == count else []

    return await eventually(check, within=30, what=f"{count} live worker rows")


async def test_children_share_one_workgroup_instance_in_their_rows(
    db: Database, conn: asyncpg.Connection, tmp_path: Path, supervisors: list[WorkerProcess]
) -> None:
    """Both children register with one UUIDv7 instance, their names as labels, their queues;
    SIGTERM then stops both cleanly (exit 0) and they deregister."""
    # The health server on, as by default: each child must bind a socket of its own.
    sockets = tmp_path / "h.sock"
    supervisor = start(
        supervisors,
        db,
        tmp_path,
        HEALTHY,
        TASKQ_HEALTH_ENABLED="true",
        TASKQ_HEALTH_SOCKET_PATH=str(sockets),
    )
    found = await live_rows(conn, db, 2)
    await eventually(
        lambda: _exist(tmp_path / "h.api.sock", tmp_path / "h.media.sock"),
        within=10,
        what="a health socket per child",
    )
    instances = {r["workgroup_instance"] for r in found}
    assert len(instances) == 1, found
    assert uuid.UUID(str(instances.pop())).version == 7
    assert {(r["worker_label"], tuple(r["queues"])) for r in found} == {
        ("api", ("default",)),
        ("media", ("media",)),
    }
    assert {r["pid"] for r in found} == set(child_pids(supervisor.pid))
    supervisor.send(signal.SIGTERM)
    assert await supervisor.wait(within=30) == 0, supervisor.output_tail()
    assert await rows(conn, db) == []


@pytest.mark.parametrize("driver", ["asyncpg"])
async def test_a_child_killed_with_9_is_restarted(
    db: Database, conn: asyncpg.Connection, tmp_path: Path, supervisors: list[WorkerProcess]
) -> None:
    supervisor = start(supervisors, db, tmp_path, HEALTHY)
    first = await live_rows(conn, db, 2)
    victim = next(r for r in first if r["worker_label"] == "api")
    os.kill(victim["pid"], signal.SIGKILL)

    async def replaced() -> list[asyncpg.Record]:
        return [
            r
            for r in await rows(conn, db)
            if r["worker_label"] == "api" and r["pid"] != victim["pid"] and alive(r["pid"])
        ]

    (again,) = await eventually(replaced, within=30, what="a new api child")
    assert again["workgroup_instance"] == victim["workgroup_instance"]
    assert "api (pid" in supervisor.stderr()
    assert "restarting" in supervisor.stderr()
    supervisor.send(signal.SIGTERM)
    assert await supervisor.wait(within=30) == 0, supervisor.output_tail()


@pytest.mark.parametrize("driver", ["asyncpg"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_stops_every_child_and_leaves_none_running(
    db: Database,
    conn: asyncpg.Connection,
    tmp_path: Path,
    supervisors: list[WorkerProcess],
    sig: signal.Signals,
) -> None:
    supervisor = start(supervisors, db, tmp_path, HEALTHY)
    pids = [r["pid"] for r in await live_rows(conn, db, 2)]
    supervisor.send(sig)
    assert await supervisor.wait(within=30) == 0, supervisor.output_tail()
    assert [pid for pid in pids if alive(pid)] == []
    assert await rows(conn, db) == []  # each child shut down cleanly and deregistered


async def test_a_stale_child_is_sigkilled_and_restarted(
    db: Database, conn: asyncpg.Connection, tmp_path: Path, supervisors: list[WorkerProcess]
) -> None:
    """A stopped child (SIGSTOP: its heartbeat no longer moves) is SIGKILLed after
    stale_after and a new one takes its place; its healthy sibling is left alone."""
    toml = HEALTHY.replace(
        "max_concurrency = 2\n",
        "max_concurrency = 2\n\n[workers.health]\nenabled = true\n"
        "check_interval = 0.5\nstale_after = 8\n",
    )
    supervisor = start(supervisors, db, tmp_path, toml)
    first = {r["worker_label"]: r["pid"] for r in await live_rows(conn, db, 2)}
    os.kill(first["api"], signal.SIGSTOP)

    async def replaced() -> list[asyncpg.Record]:
        return [
            r
            for r in await rows(conn, db)
            if r["worker_label"] == "api" and r["pid"] != first["api"] and alive(r["pid"])
        ]

    await eventually(replaced, within=40, what="the stale api child replaced")
    assert not alive(first["api"])
    assert alive(first["media"])
    assert "no heartbeat in 8s; SIGKILL" in supervisor.stderr()
    supervisor.send(signal.SIGTERM)
    assert await supervisor.wait(within=30) == 0, supervisor.output_tail()


@pytest.mark.parametrize("driver", ["asyncpg"])
async def test_a_child_crashing_at_once_is_given_up_with_exit_6(
    db: Database, conn: asyncpg.Connection, tmp_path: Path, supervisors: list[WorkerProcess]
) -> None:
    """An actors module that fails to import: 2 restarts allowed, the third crash gives
    up, the healthy sibling is stopped too, and the supervisor exits 6."""
    toml = HEALTHY.replace("max_restarts = 5", "max_restarts = 2") + (
        '\n[[workers]]\nname = "broken"\nactors = "tests.integration.worker.no_such:registry"\n'
    )
    supervisor = start(supervisors, db, tmp_path, toml)
    assert await supervisor.wait(within=45) == 6, supervisor.output_tail()
    err = supervisor.stderr()
    assert err.count("started broken") == 3, supervisor.output_tail()
    assert "broken (pid" in err
    assert "giving up" in err
    assert [r["pid"] for r in await rows(conn, db) if alive(r["pid"])] == []
    assert child_pids(supervisor.pid) == []


def run_cli(
    args: list[str], tmp_path: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskq.app.cli", *args],
        env=child_env(env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_unknown_key_is_one_line_and_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "wg.toml"
    path.write_text(HEALTHY.replace("max_concurrency = 1", "max_concurency = 1"))
    done = run_cli(["workgroup", "start", str(path)], tmp_path, {})
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"taskq: {path}: workers[1]: unknown key 'max_concurency' "
        "(known: actors, health, max_concurrency, name, poll_interval, queues)"
    ]


def test_an_unreachable_database_is_one_line_and_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "wg.toml"
    path.write_text(HEALTHY)
    done = run_cli(
        ["workgroup", "start", str(path), "--dsn", "postgresql://nobody@127.0.0.1:1/none"],
        tmp_path,
        {"TASKQ_CLIENT_CALL_TIMEOUT": "5"},
    )
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("taskq: "), done.stderr


@pytest.mark.parametrize("driver", ["asyncpg"])
async def test_a_child_that_ignores_sigterm_is_sigkilled_after_its_grace_exit_7(
    db: Database, conn: asyncpg.Connection, tmp_path: Path, supervisors: list[WorkerProcess]
) -> None:
    """A stopped child cannot act on SIGTERM: after the worker's termination grace (6.5 s
    here) plus the supervisor's 5 s margin it is SIGKILLed, and the exit code says so."""
    supervisor = start(
        supervisors,
        db,
        tmp_path,
        HEALTHY,
        TASKQ_TERMINATION_GRACE_PERIOD="6.5",
        TASKQ_CANCELLATION_GRACE_PERIOD="0.5",
        TASKQ_CLEANUP_GRACE_PERIOD="0.5",
    )
    found = {r["worker_label"]: r["pid"] for r in await live_rows(conn, db, 2)}
    os.kill(found["api"], signal.SIGSTOP)
    supervisor.send(signal.SIGTERM)
    assert await supervisor.wait(within=30) == 7, supervisor.output_tail()
    assert not alive(found["api"])
    assert not alive(found["media"])
    assert "outlived its grace; SIGKILL" in supervisor.stderr()


@pytest.mark.parametrize("driver", ["asyncpg"])
async def test_a_child_stopped_on_purpose_is_not_restarted(
    db: Database, conn: asyncpg.Connection, tmp_path: Path, supervisors: list[WorkerProcess]
) -> None:
    """A child SIGTERMed directly exits 0: it was stopped on purpose, so it stays stopped
    while its sibling runs on; the supervisor still exits 0 when told to stop."""
    supervisor = start(supervisors, db, tmp_path, HEALTHY)
    found = {r["worker_label"]: r["pid"] for r in await live_rows(conn, db, 2)}
    os.kill(found["api"], signal.SIGTERM)
    await eventually(
        lambda: _exist_line(supervisor, f"api (pid {found['api']}) exited 0"),
        within=30,
        what="the api child's clean exit",
    )
    await asyncio.sleep(1.5)  # well past the 0.2 s restart delay: a restart would show
    assert supervisor.stderr().count("started api") == 1
    assert alive(found["media"])
    supervisor.send(signal.SIGTERM)
    assert await supervisor.wait(within=30) == 0, supervisor.output_tail()


async def _exist_line(proc: WorkerProcess, line: str) -> bool:
    return line in proc.stderr()


@pytest.mark.parametrize("driver", ["psycopg"])
async def test_settings_come_from_dot_env_and_dsn_wins_for_the_children_too(
    db: Database, conn: asyncpg.Connection, tmp_path: Path, supervisors: list[WorkerProcess]
) -> None:
    """No TASKQ_* in the environment: the supervisor and its children read .env in the
    working directory; its DSN is wrong, and --dsn, which wins, reaches the children."""
    logs = tmp_path / "logs"
    logs.mkdir()
    dot_env = {**db.worker_env(), "TASKQ_PG_DSN": "postgresql://nobody@127.0.0.1:1/none"}
    (logs / ".env").write_text("".join(f"{k}={v}\n" for k, v in dot_env.items()))
    path = tmp_path / "workgroup.toml"
    path.write_text(HEALTHY)
    supervisor = WorkerProcess(
        ["workgroup", "start", str(path), "--dsn", db.dsn], {}, logs, "supervisor"
    )
    supervisors.append(supervisor)
    found = await live_rows(conn, db, 2)
    assert {r["worker_label"] for r in found} == {"api", "media"}
    supervisor.send(signal.SIGTERM)
    assert await supervisor.wait(within=30) == 0, supervisor.output_tail()
