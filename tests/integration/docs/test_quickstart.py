"""docs/quickstart.md, done as a newcomer does it: its files written as the page shows
them, its shell commands run in order through the installed console script, on a
fresh schema. Only the install (this checkout is installed already) and the DSN
(the test server's) differ, and the worker gets ``--until-idle`` so it stops itself.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from contracts.provision import (
    NoTestDatabase,
    drop_test_schema,
    fresh_schema_name,
    resolve_test_dsn,
)
from tests.unit.docs.samples import REPO, python_blocks, shell_lines

pytestmark = pytest.mark.integration

PAGE = REPO / "docs" / "quickstart.md"
TASKQ = Path(sys.executable).with_name("taskq")


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.timeout(120)
async def test_the_quickstart_runs_as_written(tmp_path: Path) -> None:
    try:
        dsn = resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))
    if not TASKQ.exists():
        pytest.skip(f"no console script at {TASKQ}")
    for block in python_blocks(PAGE):
        assert block.file is not None, f"{block.where}: every quickstart sample is a file"
        (tmp_path / block.file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / block.file).write_text(block.code, encoding="utf-8")
    schema = fresh_schema_name("taskq_quickstart")
    # As a user's shell: no PYTHONPATH, no TASKQ_* but the two the page sets.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
    env.pop("PYTHONPATH", None)
    # The page's own settings, plus the health socket tests/conftest.py gave this test:
    # the default path belongs to whatever worker already runs on this machine.
    env |= {
        "TASKQ_PG_DSN": dsn,
        "TASKQ_SCHEMA_NAME": schema,
        "TASKQ_HEALTH_SOCKET_PATH": os.environ["TASKQ_HEALTH_SOCKET_PATH"],
    }
    outputs: dict[str, str] = {}
    try:
        for block, line in shell_lines(PAGE):
            argv = shlex.split(line)
            if argv[:2] == ["pip", "install"]:
                assert argv[2:] == ["taskq-pg"], f"{block.where}: {line}"
                continue
            if argv[0] == "export":
                assert argv[1].startswith("TASKQ_PG_DSN="), f"{block.where}: {line}"
                continue
            if argv[0] == "taskq":
                argv[0] = str(TASKQ)
                if argv[1] == "worker":
                    argv.append("--until-idle")
            elif argv[0] == "python":
                argv[0] = sys.executable
            else:
                pytest.fail(f"{block.where}: the test does not know how to run {line!r}")
            result = await asyncio.to_thread(_run, argv, tmp_path, env)
            assert result.returncode == 0, f"{line}\n{result.stdout}{result.stderr}"
            outputs[line] = result.stdout
    finally:
        await drop_test_schema(dsn, schema)
    assert "enqueued job 1" in outputs["python enqueue.py"]
    worker = outputs["taskq worker --actors myapp.actors:registry --queues email"]
    assert "hello Ada <ada@example.com> (attempt 1)" in worker
    assert "status:           succeeded" in outputs["taskq jobs get 1"]
