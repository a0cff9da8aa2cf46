"""The wheel and a plain install of the checkout, as a user gets them.

Builds the wheel from this checkout, checks that ``taskq`` is its only top-level
package (the contract suite inside it), installs it (not editable) into a fresh
venv and runs ``pytest --taskq-adapter=...`` in a project of its own, with no
``-p`` and no path. Then installs the checkout with a plain ``pip install`` into
another fresh venv and runs ``taskq --version``.

The fresh venvs take TaskQ's dependencies (and pytest) from this venv's
site-packages, through a directory of links that leaves TaskQ itself out: nothing
is downloaded but the build backend, and the installed taskq is the only one
they can import.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PIP = [sys.executable, "-m", "pip"]

TINY_ADAPTER = """
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from taskq.testing import Harness, memory_harness


@asynccontextmanager
async def tiny_harness() -> AsyncIterator[Harness]:
    async with memory_harness() as harness:
        harness.name = "tiny"
        yield harness
"""
#: The project's own tests, with a fixture named like the suite's: they must run alone
#: without the option and not at all with it.
OWN_CONFTEST = """
import pytest


@pytest.fixture
def harness() -> str:
    return "mine"
"""
OWN_TEST = """
def test_own_harness(harness):
    assert harness == "mine"
"""
PROJECT_CONFIG = """
[tool.pytest.ini_options]
testpaths = ["tests"]
"""


def _run(args: list[str], cwd: Path | None = None) -> str:
    run = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=180)
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"{args}:\n{output}"
    return output


def _version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        version: str = tomllib.load(f)["project"]["version"]
    return version


@pytest.fixture(scope="module")
def deps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This venv's site-packages without TaskQ: a link to every other entry."""
    site = Path(sysconfig.get_paths()["purelib"])
    links = tmp_path_factory.mktemp("deps")
    for entry in site.iterdir():
        name = entry.name.lower()
        if name == "taskq" or name.startswith(("taskq_pg", "_editable_impl_", "__editable__")):
            continue
        (links / entry.name).symlink_to(entry)
    return links


def _fresh_venv(path: Path, deps: Path) -> Path:
    """A venv seeing only the standard library, ``deps`` and what is installed into it."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(path)])
    python = path / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    Path(purelib.strip(), "_taskq_test_deps.pth").write_text(f"{deps}\n", encoding="utf-8")
    return python


def _imported_from(python: Path) -> str:
    return _run([str(python), "-c", "import taskq; print(taskq.__file__)"]).strip()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run([*PIP, "wheel", "--no-deps", "--quiet", str(REPO), "-w", str(out)])
    (built,) = out.glob("taskq_pg-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_python(wheel: Path, deps: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("wheel-venv") / "venv"
    python = _fresh_venv(venv, deps)
    _run([*PIP, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)])
    assert _imported_from(python).startswith(str(venv))
    return python


def test_taskq_is_the_wheels_only_top_level_package(wheel: Path) -> None:
    """The suite ships inside the package; no ``contracts`` package beside it."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read(f"taskq_pg-{_version()}.dist-info/entry_points.txt")
    assert {n.split("/")[0] for n in names} == {"taskq", f"taskq_pg-{_version()}.dist-info"}
    for shipped in ("conftest.py", "plugin.py", "test_leases.py", "factories/memory.py"):
        assert f"taskq/testing/contracts/{shipped}" in names
    assert "[pytest11]\ntaskq = taskq.testing.plugin" in entry_points.decode()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with tests of its own and a harness factory wrapping the memory adapter."""
    (tmp_path / "pyproject.toml").write_text(PROJECT_CONFIG, encoding="utf-8")
    (tmp_path / "tiny_adapter.py").write_text(TINY_ADAPTER, encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(OWN_CONFTEST, encoding="utf-8")
    (tmp_path / "tests" / "test_own.py").write_text(OWN_TEST, encoding="utf-8")
    return tmp_path


def _pytest(python: Path, project: Path, *args: str) -> str:
    # -P: the working directory is not put on sys.path, as with the pytest console script.
    return _run([str(python), "-P", "-m", "pytest", "-p", "no:cacheprovider", *args], project)


def test_the_option_alone_runs_the_installed_suite(wheel_python: Path, project: Path) -> None:
    """``pytest --taskq-adapter=module:factory``: the shipped suite runs, the project's own
    tests do not, and the factory's module is found in the directory pytest runs in."""
    output = _pytest(wheel_python, project, "-q", "--taskq-adapter=tiny_adapter:tiny_harness")
    ran = re.search(r"taskq contract suite — tiny: (\d+) tests", output)
    passed = re.search(r"(\d+) passed", output)
    assert ran, output
    assert passed, output
    assert int(ran.group(1)) == int(passed.group(1)) > 300
    assert " failed" not in output
    assert " error" not in output


def test_a_failure_id_reruns_under_pyargs(wheel_python: Path, project: Path) -> None:
    """The id pytest reports (``test_leases.py::name[tiny]``) reruns that one test with the
    suite's package in front, as docs/contract-suite.md says."""
    listed = _pytest(
        wheel_python, project, "-q", "--collect-only", "--taskq-adapter=tiny_adapter:tiny_harness"
    )
    test_id = next(line for line in listed.splitlines() if line.startswith("test_leases.py::"))
    pyarg = "taskq.testing.contracts.test_leases" + test_id.removeprefix("test_leases.py")
    output = _pytest(
        wheel_python, project, "-q", "--taskq-adapter=tiny_adapter:tiny_harness", "--pyargs", pyarg
    )
    assert re.search(r"\b1 passed\b", output), output


def test_without_the_option_the_project_runs_as_before(wheel_python: Path, project: Path) -> None:
    """Installed but not asked for, the plugin collects nothing and says nothing."""
    output = _pytest(wheel_python, project, "-q")
    assert re.search(r"\b1 passed\b", output), output
    assert "taskq contract suite" not in output


def test_a_plain_install_of_the_checkout_works(
    deps: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``pip install .`` (not editable) builds, installs and gives a working console script."""
    venv = tmp_path_factory.mktemp("checkout-venv") / "venv"
    python = _fresh_venv(venv, deps)
    _run([*PIP, "--python", str(python), "install", "--no-deps", "--quiet", str(REPO)])
    assert _imported_from(python).startswith(str(venv))
    assert _run([str(venv / "bin" / "taskq"), "--version"]) == f"taskq {_version()}\n"
