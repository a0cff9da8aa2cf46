"""In a real worker on Postgres, an aliased payload runs and its result reads back, and
a NaN in an untyped result fails its job naming it instead of being stored as null."""

from __future__ import annotations

import asyncpg
import pytest
from tests.integration.worker.json_actors_fixture import Signup, Welcome, on_signup, untyped_nan
from tests.integration.worker.support import Database, WorkerSpawner

from taskq import JobsClient
from taskq.domain.status import JobStatus

pytestmark = pytest.mark.integration

REGISTRY = "tests.integration.worker.json_actors_fixture:registry"


async def test_aliased_payloads_run_and_untyped_nan_results_fail_named(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    signup = await client.enqueue(on_signup, Signup(userId=5))
    [listed] = await client.enqueue_many(on_signup, [{"userId": 6}])
    nan = await client.enqueue(untyped_nan, Signup(userId=7))

    worker = workers.start(
        db.worker_env(), "--until-idle", "--idle-max-runtime", "30", registry=REGISTRY
    )
    assert await worker.wait(within=60) == 3, worker.output_tail()  # one failed
    assert await signup.wait(timeout=5) == Welcome(greetingText="hi 5")
    assert await listed.wait(timeout=5) == Welcome(greetingText="hi 6")
    stored = await conn.fetchrow(
        f"SELECT payload::text, result::text FROM {db.schema}.jobs WHERE id = $1", signup.job_id
    )
    assert stored is not None
    assert (stored["payload"], stored["result"]) == (
        '{"user_id": 5}',
        '{"greeting_text": "hi 5"}',
    )
    failed = await client.get(nan.job_id)
    assert failed is not None
    assert failed.status is JobStatus.FAILED
    assert "result['ratio'] is nan (JSON has no NaN or infinity)" in (failed.last_error or "")
