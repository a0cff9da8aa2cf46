"""Runs the operator commands (``taskq jobs|queues|workers|actor-config``) as an operator
would: a child process with only the ``TASKQ_*`` variables given, in a given directory."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.worker.support import Database, child_env


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.code == 0, self
        return json.loads(self.out)


async def taskq(*args: str, env: Mapping[str, str], cwd: Path) -> Run:
    """``taskq ARGS`` in a child process; its exit code, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "taskq.app.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(env),
        cwd=cwd,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


def operator_env(db: Database) -> dict[str, str]:
    """What an operator's shell has for ``db``: the DSN, the schema, the driver."""
    return {
        "TASKQ_PG_DSN": db.dsn,
        "TASKQ_SCHEMA_NAME": db.schema,
        "TASKQ_DRIVER": db.driver,
    }
