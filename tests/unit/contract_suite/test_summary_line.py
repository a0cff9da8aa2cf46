"""The suite's last line counts the tests that run, after every kind of deselection."""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.contract_suite.test_ports_option import _count, _pytest

MEMORY = "taskq.testing.memory:memory_harness"


def test_the_count_leaves_out_tests_deselected_by_k(tmp_path: Path) -> None:
    """``-k`` deselects after collection: the line counts what ran, not all 401."""
    run = _pytest(tmp_path, f"--taskq-adapter={MEMORY}", "-k", "test_clock")
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    ran = _count(r"memory: (\d+) tests", output)
    assert ran == _count(r"(\d+) passed", output)
    assert re.search(r"\d+ deselected", output), output


def test_one_test_is_counted_in_the_singular(tmp_path: Path) -> None:
    run = _pytest(tmp_path, f"--taskq-adapter={MEMORY}", "-k", "test_store_ping_succeeds")
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "taskq contract suite — memory: 1 test\n" in output
