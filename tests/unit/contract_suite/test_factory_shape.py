"""A malformed harness factory is refused once, saying what a factory must be.

Was: ~296 identical raw errors ("'coroutine' object does not support the asynchronous
context manager protocol") over 15 s. Runs the suite as an adapter author would: pytest
from another directory, strict-mode pytest-asyncio, only ``--taskq-adapter`` given.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
MODULE = "tests.unit.contract_suite.bad_factories"
SHAPE = "a harness factory is a function taking no arguments that returns an async context"


def _run_suite(tmp_path: Path, factory: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    args = ["-p", "no:randomly", "-q"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args, f"--taskq-adapter={MODULE}:{factory}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("factory", "problem"),
    [
        ("plain_async", "it is a plain async def"),
        ("sync_cm", "it is a sync generator or @contextlib.contextmanager"),
        ("needs_arg", "it needs arguments (dsn)"),
        ("async_gen", "it is an async generator function without @contextlib.asynccontextmanager"),
    ],
)
def test_a_factory_of_the_wrong_kind_is_a_usage_error(
    tmp_path: Path, factory: str, problem: str
) -> None:
    """Seen without calling it: refused before any test runs."""
    result = _run_suite(tmp_path, factory)
    output = result.stdout + result.stderr
    assert result.returncode == 4, output
    assert f"--taskq-adapter={MODULE}:{factory}: {problem}" in output
    assert output.count(SHAPE) == 1


@pytest.mark.parametrize(
    ("factory", "problem"),
    [
        ("returns_coroutine", "it returned coroutine"),
        ("yields_dict", "its context manager yielded dict"),
        ("yields_store", "its context manager yielded MemoryQueueStore"),
    ],
)
def test_a_factory_giving_the_wrong_thing_stops_the_run_once(
    tmp_path: Path, factory: str, problem: str
) -> None:
    """Seen only when entered: the first test stops the run with one message."""
    result = _run_suite(tmp_path, factory)
    output = result.stdout + result.stderr
    assert result.returncode == 4, output
    assert f"{MODULE}:{factory} is not a harness factory: {problem}; {SHAPE}" in output
    assert output.count(SHAPE) == 1
    assert "asynchronous context manager protocol" not in output
    assert "no tests ran" in output


def _run_in(project: Path, spec: str) -> subprocess.CompletedProcess[str]:
    """pytest in ``project`` with only ``--taskq-adapter``, its module found there."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", f"--taskq-adapter={spec}"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_module_names_where_it_was_looked_for(tmp_path: Path) -> None:
    """Was only ``ModuleNotFoundError: No module named 'mypkg'``, without saying that the
    directory pytest runs in is searched too (so a wrong directory is the likely cause)."""
    result = _run_in(tmp_path, "mypkg.testing:my_harness")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "No module named 'mypkg'" in result.stderr
    assert f"nor under {tmp_path}, the directory pytest runs in: install it" in result.stderr


def test_a_module_that_raises_on_import_names_the_line(tmp_path: Path) -> None:
    """A usage error prints no traceback: was only ``RuntimeError: no backend``."""
    (tmp_path / "myharness.py").write_text("import os\n\nraise RuntimeError('no backend')\n")
    result = _run_in(tmp_path, "myharness:my_harness")
    assert result.returncode == 4, result.stdout + result.stderr
    where = tmp_path / "myharness.py"
    assert f"RuntimeError: no backend (raised at {where}:3)" in result.stderr


def test_a_src_layout_module_is_found_through_pytests_pythonpath(tmp_path: Path) -> None:
    """The remedy the error and docs/contract-suite.md give for an uninstalled ``src/``
    package: pytest's ``pythonpath`` applies before the factory is loaded."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "srcharness.py").write_text(
        "from taskq.testing import memory_harness as src_harness\n"
    )
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["src"]\n')
    result = _run_in(tmp_path, "srcharness:src_harness")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "taskq contract suite — src:" in result.stdout
