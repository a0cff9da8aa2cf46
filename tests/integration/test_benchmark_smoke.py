"""The throughput benchmark script still runs end to end (tiny sizes, no timing checks)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from contracts.provision import NoTestDatabase, resolve_test_dsn

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_throughput.py"


@pytest.fixture(scope="module")
def dsn() -> str:
    try:
        return resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


def test_quick_benchmark_completes_and_prints_its_table(dsn: str) -> None:
    """`bench_throughput.py --quick --jobs 500` exits 0 and prints a row for every measurement."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
    env["TASKQ_PG_DSN"] = dsn
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
        "(c) enqueue() one by one, asyncpg",
        "(c) enqueue_many()",
        "(d) enqueue→start p50/p90/p99, psycopg",
        "plan: claim on 500 finished rows",
    ):
        assert row in out, f"missing {row!r} in:\n{out}"
    assert "PASS" in out or "FAIL" in out
