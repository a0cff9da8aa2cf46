"""A role without the privileges TaskQ needs: one clear error naming the fix, no traceback."""

from __future__ import annotations

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, record
from tests.integration.worker.roles import as_user, login_role
from tests.integration.worker.support import Database, WorkerSpawner

from taskq import ConfigurationError, JobsClient
from taskq.app.settings import TaskQSettings

pytestmark = pytest.mark.integration

FIX = "grant it USAGE on the TaskQ schema"


async def test_a_role_without_privileges_gets_the_grants_it_lacks_named(
    db: Database, conn: asyncpg.Connection, workers: WorkerSpawner
) -> None:
    async with login_role(conn, db.schema, ("GRANT USAGE ON SCHEMA {schema} TO {role}",)) as role:
        role_dsn = as_user(db.dsn, role)
        settings = TaskQSettings.load_from_dict(
            {"pg_dsn": role_dsn, "schema_name": db.schema, "driver": db.driver}
        )
        # The client's schema check, when it opens, is the first statement to meet it.
        with pytest.raises(ConfigurationError, match="permission denied for table") as refused:
            async with JobsClient.connect(settings=settings) as client:
                await client.enqueue(record, Item(n=1))
        assert FIX in str(refused.value)

        worker = workers.start(db.worker_env(TASKQ_PG_DSN=role_dsn))
        assert await worker.wait(within=60) == 1
        assert "Traceback" not in worker.stderr() + worker.stdout(), worker.output_tail()
        (failure,) = worker.events("worker-config-error")
        assert "permission denied for table" in failure["error"]
        assert FIX in failure["error"]
