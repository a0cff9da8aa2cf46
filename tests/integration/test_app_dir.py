"""``--actors`` imports from the working directory, or ``--app-dir``, through the console script.

The console script (unlike ``python -m``) does not put the working directory on
``sys.path``, so these run ``.venv/bin/taskq`` itself, with no PYTHONPATH pointing
at the application.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

TASKQ = Path(sys.executable).with_name("taskq")
REPO = Path(__file__).resolve().parents[2]
ACTORS = """
from pydantic import BaseModel

from taskq import actor


class Hello(BaseModel):
    name: str


@actor(queue="default")
async def hello_app_dir(payload: Hello) -> None: ...


registry = [hello_app_dir]
"""


@pytest.fixture
def parent(tmp_path: Path) -> Path:
    """A directory holding the package ``myapp_door`` with ``actors.registry``."""
    package = tmp_path / "parent" / "myapp_door"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "actors.py").write_text(ACTORS)
    return package.parent


def taskq(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    if not TASKQ.exists():
        pytest.skip(f"no console script at {TASKQ}")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
    # Only the repository (for the tests' memory driver), never the application's folder.
    clean["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [str(TASKQ), *args],
        cwd=cwd,
        env={**clean, "TASKQ_PG_DSN": "postgresql://u@127.0.0.1:1/x", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


MEMORY = "tests.unit.app.cli.memory_driver:ports"


def test_actor_config_diff_imports_from_the_working_directory(parent: Path) -> None:
    run = taskq(
        "actor-config",
        "diff",
        "--actors",
        "myapp_door.actors:registry",
        cwd=parent,
        TASKQ_DRIVER=MEMORY,
    )
    assert run.returncode == 0, run.stderr
    assert "hello_app_dir" in run.stdout


def test_app_dir_points_elsewhere(parent: Path, tmp_path: Path) -> None:
    args = ("actor-config", "diff", "--actors", "myapp_door.actors:registry")
    run = taskq(*args, "--app-dir", str(parent), cwd=tmp_path, TASKQ_DRIVER=MEMORY)
    assert run.returncode == 0, run.stderr
    assert "hello_app_dir" in run.stdout
    relative = taskq(*args, "--app-dir", "parent", cwd=tmp_path, TASKQ_DRIVER=MEMORY)
    assert relative.returncode == 0, relative.stderr


def test_worker_imports_from_the_working_directory(parent: Path) -> None:
    # The registry loads; the worker then fails on the (unreachable) database, not the import.
    run = taskq("worker", "--actors", "myapp_door.actors:registry", cwd=parent)
    assert run.returncode == 1
    assert "actor registry" not in run.stderr
    assert "cannot connect to Postgres" in run.stderr


def test_a_missing_module_names_the_directories_searched(parent: Path, tmp_path: Path) -> None:
    run = taskq("worker", "--actors", "myapp_door.actors:registry", cwd=tmp_path)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert "No module named 'myapp_door'" in last
    assert f"searched: {tmp_path}" in last
    assert "--app-dir" in last
    missing = taskq("worker", "--actors", "x.y:z", "--app-dir", "nope", cwd=tmp_path)
    assert missing.returncode == 1
    assert f"--app-dir {tmp_path / 'nope'} is not a directory" in missing.stderr


def test_a_module_under_a_plain_module_is_not_called_a_package(parent: Path) -> None:
    run = taskq("worker", "--actors", "myapp_door.actors.sub:registry", cwd=parent)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.endswith("'myapp_door.actors' is not a package")


def test_a_mistyped_module_in_a_found_package_says_so(parent: Path) -> None:
    # The package is found from the working directory: advice to move elsewhere would mislead.
    run = taskq("worker", "--actors", "myapp_door.actor:registry", cwd=parent)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert f"the package 'myapp_door' (in {parent / 'myapp_door'}) has no module 'actor'" in last
    assert "run from the directory" not in last
    assert "searched:" not in last


def test_an_actor_signature_error_points_at_the_application_s_line(parent: Path) -> None:
    # Not at the line of TaskQ's own signature check that raised it.
    (parent / "myapp_door" / "wrong.py").write_text(
        "from taskq import actor\n\n\n@actor(queue='default')\nasync def f(payload):\n    pass\n"
    )
    run = taskq("worker", "--actors", "myapp_door.wrong:f", cwd=parent)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert "ActorSignatureError" in last
    # The decorator's line or the def's, as the Python version numbers the call.
    assert last.endswith(tuple(f"(at {parent / 'myapp_door' / 'wrong.py'}:{n})" for n in (4, 5)))


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            "myapp_door/actors.py:registry",
            "names a file: give the module's dotted name, as in 'myapp_door.actors:registry', "
            "from the directory that holds 'myapp_door' (or pass --app-dir DIR)",
        ),
        ("myapp_door/actors.py", "as in 'myapp_door.actors:registry'"),
        ("myapp_door.actors.py:registry", "as in 'myapp_door.actors:registry'"),
        ("myapp_door.actors.registry", "(a colon before the attribute, as in "),
    ],
)
def test_a_path_or_a_missing_colon_says_how_to_write_the_registry(
    parent: Path, given: str, said: str
) -> None:
    run = taskq("worker", "--actors", given, cwd=parent)
    assert run.returncode == 1
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(f"taskq: actor registry {given!r} ")
    assert said in line
