"""A server that refuses the connection reads the same from the worker on either driver
as from ``taskq migrate``: ``connection refused``, not asyncpg's ``[Errno 111] Connect
call failed ('127.0.0.1', 1)`` or libpq's ``connection failed: connection to server at
"127.0.0.1", port 1 failed: Connection refused``."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.integration.test_migrate_cli import taskq

pytestmark = pytest.mark.integration

REFUSED = "postgresql://postgres@127.0.0.1:1/test"  # nothing listens on port 1


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg"])
async def test_the_worker_says_connection_refused(driver: str, tmp_path: Path) -> None:
    (tmp_path / "noactors.py").write_text("registry = []\n")
    run = await taskq(
        "worker",
        "--actors",
        "noactors:registry",
        cwd=tmp_path,
        env={"TASKQ_PG_DSN": REFUSED, "TASKQ_DRIVER": driver},
    )
    assert run.code == 1
    last = run.err.strip().splitlines()[-1]
    assert last == "taskq: cannot connect to Postgres at 127.0.0.1:1: connection refused"
