"""The runnable example in docs/examples runs green, the ways a user runs it.

Under pytest from its own directory (no project config: pytest-asyncio's default
strict mode, where an unmarked async test fails) and directly with python.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[4] / "docs" / "examples" / "worker_in_app_test.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
    return subprocess.run(
        [sys.executable, *args],
        cwd=EXAMPLE.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_example_passes_under_strict_mode_pytest() -> None:
    """docs/examples/worker_in_app_test.py: a worker on the memory adapter and a fake clock."""
    result = _run(
        "-m",
        "pytest",
        EXAMPLE.name,
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "-o",
        "asyncio_mode=strict",
        "-q",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_the_example_runs_directly() -> None:
    result = _run(EXAMPLE.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "ok"
