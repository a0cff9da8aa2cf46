"""The benchmark scripts still run end to end (tiny sizes, no timing checks)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from contracts.provision import NoTestDatabase, resolve_test_dsn

pytestmark = pytest.mark.integration

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "bench_throughput.py"


@pytest.fixture(scope="module")
def dsn() -> str:
    try:
        return resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


def _env(dsn: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
    env["TASKQ_PG_DSN"] = dsn
    return env


def test_quick_benchmark_completes_and_prints_its_table(dsn: str) -> None:
    """`bench_throughput.py --quick --jobs 500` exits 0 and prints a row for every measurement."""
    env = _env(dsn)
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--jobs", "500"],
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "measurement" in out
    for row in (
        "(b) raw drain",
        "(a) drain, asyncpg worker",
        "(a) drain, psycopg worker",
        "(a) drain, asyncpg: first → last fifth of the jobs",
        "(b) raw drain: first → last fifth of the jobs",
        "(c) enqueue() one by one, asyncpg",
        "(c) enqueue_many()",
        "(d) enqueue→start p50/p90/p99, psycopg",
        "plan: claim on 500 finished rows",
    ):
        assert row in out, f"missing {row!r} in:\n{out}"
    assert "PASS" in out or "FAIL" in out
    if shutil.which("pgbench") is not None:
        assert "(c) its INSERT alone, server only (pgbench)" in out, out


def test_round_robin_benchmark_prints_a_row_per_backlog_and_cohorts(dsn: str) -> None:
    """`bench_round_robin.py` with tiny sizes exits 0 and prints one row per combination."""
    run = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "bench_round_robin.py"),
            "--backlogs",
            "50,200",
            "--cohorts",
            "1,10",
            "--claims",
            "2",
        ],
        env=_env(dsn),
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    rows = [line.split() for line in run.stdout.splitlines()[1:] if line.strip()]
    assert [(row[0], row[1]) for row in rows] == [
        ("50", "1"),
        ("200", "1"),
        ("50", "10"),
        ("200", "10"),
    ]
    assert all(float(row[2]) > 0 and float(row[3]) > 0 for row in rows)


def test_health_benchmark_drains_both_modes_and_measures_serving(dsn: str) -> None:
    """`bench_health.py` with tiny sizes exits 0 and prints each mode, the verdict and the
    serving cost: the shared drain harness ran with each arm's env and the scraper beside."""
    run = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "bench_health.py"),
            "--jobs",
            "200",
            "--rounds",
            "1",
            "--window",
            "0.3",
            "--scrape-every",
            "0.02",
        ],
        env=_env(dsn),
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    for line in ("raw baseline", "health off", "health on", "on/off:", "serving costs"):
        assert line in run.stdout, f"missing {line!r} in:\n{run.stdout}"
    answered = re.search(r"health on: .*?, (\d+) scrapes answered", run.stderr)
    assert answered is not None, run.stderr
    assert int(answered.group(1)) > 0, run.stderr
