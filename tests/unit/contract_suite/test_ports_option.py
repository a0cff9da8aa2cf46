"""``--taskq-ports``: an adapter implementing only some ports runs only their contracts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PARTIAL = "tests.unit.contract_suite.partial_factories:limiter_only_harness"


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest from another directory, as an adapter author runs the suite."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _count(pattern: str, output: str) -> int:
    found = re.search(pattern, output)
    assert found, output
    return int(found.group(1))


def test_a_rate_limiter_only_adapter_runs_the_rate_limiter_contracts(tmp_path: Path) -> None:
    """Only the rate-limiter tests run (and pass); every other test is deselected, so none
    reaches the ports the adapter lacks."""
    run = _pytest(tmp_path, f"--taskq-adapter={PARTIAL}", "--taskq-ports=rate_limiter")
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    ran = _count(r"limiter_only: (\d+) tests", output)
    assert ran == _count(r"(\d+) passed", output)
    assert 0 < ran < _count(r"(\d+) deselected", output)
    assert "they need ports beyond rate_limiter" in output


def test_without_the_ports_option_every_port_is_tested(tmp_path: Path) -> None:
    """The same adapter without ``--taskq-ports`` reaches the ports it lacks and fails."""
    run = _pytest(tmp_path, f"--taskq-adapter={PARTIAL}", "-x", "-k", "leader")
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "this adapter implements only the rate limiter" in output


def test_naming_a_port_the_harness_lacks_fails_instead_of_skipping(tmp_path: Path) -> None:
    """``--taskq-ports=rate_limiter`` with ``open_rate_limiter=None``: every test fails, so
    the run is not green having tested nothing (it skipped all 15, exit 0)."""
    factory = "tests.unit.contract_suite.partial_factories:no_limiter_harness"
    run = _pytest(tmp_path, f"--taskq-adapter={factory}", "--taskq-ports=rate_limiter")
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "skipped" not in output
    assert "provides no rate limiter (open_rate_limiter is None), but --taskq-ports" in output


def test_without_the_ports_option_a_missing_rate_limiter_skips(tmp_path: Path) -> None:
    factory = "tests.unit.contract_suite.partial_factories:no_limiter_harness"
    run = _pytest(tmp_path, f"--taskq-adapter={factory}", "-k", "test_rate_limiter")
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert _count(r"(\d+) skipped", output) == _count(r"no_limiter: (\d+) tests", output)


def test_the_ports_option_without_the_suite_is_a_usage_error(tmp_path: Path) -> None:
    """Without ``--taskq-adapter`` a project's own tests ran, the option silently ignored."""
    (tmp_path / "test_own.py").write_text("def test_own() -> None:\n    pass\n")
    run = _pytest(tmp_path, "--taskq-ports=rate_limiter")
    assert run.returncode == 4, run.stdout + run.stderr
    assert "--taskq-ports selects contract tests, and none was collected: give" in run.stderr


def test_an_unknown_port_is_a_usage_error(tmp_path: Path) -> None:
    run = _pytest(tmp_path, f"--taskq-adapter={PARTIAL}", "--taskq-ports=rate_limiter,queues")
    assert run.returncode == 4
    assert "--taskq-ports=rate_limiter,queues: unknown port queues; ports: " in run.stderr


def test_the_suite_runs_in_the_repository_with_the_entry_point_disabled() -> None:
    """``-p no:taskq`` leaves the options undefined: the suite runs its built-in adapters."""
    clock_tests = str(REPO / "contracts" / "test_clock.py")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:taskq", "-k", "memory", clock_tests],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout
