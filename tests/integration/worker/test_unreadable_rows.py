"""Job rows TaskQ did not write fail on their own in a real worker; the worker goes on.

A payload inserted by other means that is a JSON array, or nested deeper than Python's
decoder goes, used to crash the worker at the claim that took it (exit 1, every job of
that claim left running), and again in whichever worker reclaimed it.
"""

from __future__ import annotations

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, record
from tests.integration.worker.support import Database, WorkerSpawner, status_counts

from taskq import JobsClient

pytestmark = pytest.mark.integration

DEEP = '{"n": 1, "x": ' + "[" * 3000 + "]" * 3000 + "}"


async def test_unreadable_rows_fail_alone_and_every_other_job_runs_once(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    await client.enqueue_many(record, [Item(n=i) for i in range(100)])
    odd = {
        payload: await conn.fetchval(
            f"INSERT INTO {db.schema}.jobs (queue, actor, payload, status) "
            "VALUES ('default', 'record', $1::text::jsonb, 'pending') RETURNING id",
            payload,
        )
        for payload in (DEEP, "[1, 2]")
    }
    await client.enqueue_many(record, [Item(n=i) for i in range(100, 200)])

    worker = workers.start(db.worker_env(), "--until-idle", "--idle-max-runtime", "60")
    code = await worker.wait(within=90)
    assert code == 3, worker.output_tail()  # two failed; the worker did not crash
    assert await status_counts(conn, db.schema) == {"succeeded": 200, "failed": 2}
    runs = await conn.fetch(
        f"SELECT job_id, count(*) AS n FROM {db.schema}.side_effects GROUP BY job_id"
    )
    assert len(runs) == 200  # the two odd ones never ran
    assert {r["n"] for r in runs} == {1}
    errors = {
        r["id"]: r["last_error"]
        for r in await conn.fetch(
            f"SELECT id, last_error FROM {db.schema}.jobs WHERE status = 'failed'"
        )
    }
    assert "nested too deeply to decode" in errors[odd[DEEP]]
    assert "the stored payload is an array, not a JSON object" in errors[odd["[1, 2]"]]
