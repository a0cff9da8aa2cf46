"""No built-in DSN: with neither TASKQ_PG_DSN nor --dsn, what needs Postgres says so first.

Before, `taskq migrate up` silently used postgresql://taskq:taskq@localhost:5432/taskq
and failed with `role "taskq" does not exist`, never naming the variable.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.integration.test_migrate_cli import taskq

from taskq import JobsClient
from taskq.app import composition
from taskq.app.settings import TaskQSettings, WorkerSettings
from taskq.domain.errors import ConfigurationError

pytestmark = pytest.mark.integration

MISSING = "taskq: TASKQ_PG_DSN is not set: name your database with TASKQ_PG_DSN=postgresql://"
COMMANDS = [
    ("migrate", "up"),
    ("migrate", "down"),
    ("migrate", "status"),
    ("jobs", "list"),
    ("jobs", "get", "1"),
    ("workers", "list"),
    ("queues", "list"),
    ("actor-config", "list"),
    ("actor-config", "get", "x"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
async def test_a_command_without_a_dsn_names_the_variable(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    run = await taskq(*command, cwd=tmp_path)  # no TASKQ_* variable, no .env
    assert run.code == 1
    assert run.out == ""
    (line,) = run.err.splitlines()
    assert line.startswith(MISSING), line
    assert line.endswith("in the environment or in .env, or pass --dsn"), line


async def test_the_worker_without_a_dsn_names_the_variable(tmp_path: Path) -> None:
    (tmp_path / "noactors.py").write_text("registry = []\n")
    run = await taskq("worker", "--actors", "noactors:registry", cwd=tmp_path)
    assert run.code == 1
    (line,) = run.err.splitlines()
    assert line.startswith(MISSING), line
    assert line.endswith("in the environment or in .env"), line


async def test_settings_built_in_code_refuse_before_connecting() -> None:
    """A library user's settings without a DSN: ConfigurationError, no connection attempt."""
    assert TaskQSettings.load_from_dict({}).pg_dsn == ""
    with pytest.raises(ConfigurationError, match=r"^TASKQ_PG_DSN is not set: "):
        async with JobsClient.connect(settings=TaskQSettings.load_from_dict({})):
            pass
    with pytest.raises(ConfigurationError, match=r"^TASKQ_PG_DSN is not set: "):
        await composition.build_worker_ports(WorkerSettings.load_from_dict({}))
    with pytest.raises(ConfigurationError, match=r"^TASKQ_PG_DSN is not set: "):
        await composition.migrate_up(dsn="")
