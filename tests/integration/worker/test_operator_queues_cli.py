"""``taskq queues`` through the real CLI on real Postgres, both drivers: set a queue's mode,
see it listed with its backlog, its oldest pending job and whether a live worker consumes it."""

from __future__ import annotations

import signal
from pathlib import Path

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, Nap, nap, record
from tests.integration.worker.operator_cli import operator_env, taskq
from tests.integration.worker.support import Database, WorkerSpawner, eventually

from taskq import JobsClient

pytestmark = pytest.mark.integration


async def test_set_mode_and_list_queues(
    db: Database,
    client: JobsClient,
    workers: WorkerSpawner,
    conn: asyncpg.Connection,
    tmp_path: Path,
) -> None:
    """queues set-mode (--force: no job names the queue yet) writes the queue's row; queues
    list shows the mode, the pending backlog of an unconsumed queue with its age, and a
    running worker's queue as consumed."""
    env = operator_env(db)
    switched = await taskq(
        "queues", "set-mode", "tenants", "round_robin", "--force", env=env, cwd=tmp_path
    )
    assert (switched.code, switched.err) == (0, ""), switched
    assert "round_robin (was strict_fifo)" in switched.out
    mode = await conn.fetchval(f'SELECT mode FROM "{db.schema}".queues WHERE name = $1', "tenants")
    assert mode == "round_robin"

    for n in range(3):
        await client.enqueue(record, Item(n=n), queue="tenants")
    await client.enqueue(nap, Nap(seconds=60))
    worker = workers.start(db.worker_env())  # consumes "default" only
    try:

        async def listed() -> dict[str, dict[str, object]]:
            run = await taskq("queues", "list", "--json", env=env, cwd=tmp_path)
            queues = {q["queue"]: q for q in run.json()}
            ready = queues.get("default", {}).get("running") == 1
            return queues if ready else {}

        queues = await eventually(
            listed, within=30, what="the nap running", interval=0.2, context=worker.output_tail
        )
        tenants, default = queues["tenants"], queues["default"]
        assert (tenants["mode"], tenants["pending"], tenants["consumed"]) == (
            "round_robin",
            3,
            False,
        )
        assert isinstance(tenants["oldest_pending_age_seconds"], float)
        assert tenants["oldest_pending_due_at"] is not None
        assert (default["mode"], default["consumed"], default["live_workers"]) == (
            "strict_fifo",
            True,
            1,
        )
        table = await taskq("queues", "list", env=env, cwd=tmp_path)
        row = next(line for line in table.out.splitlines() if line.strip().startswith("tenants"))
        assert row.split()[:3] == ["tenants", "round_robin", "3"]
        assert row.split()[-1] == "none"
    finally:
        worker.send(signal.SIGTERM)
        await worker.wait(within=30)
