"""``taskq actor-config`` through the real CLI on real Postgres, both drivers: tune a running
worker's actor live (pause it, resume it), read the rows back, and diff a registry."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from tests.integration.worker.actors_fixture import Item, record, record_once
from tests.integration.worker.operator_cli import operator_env, taskq
from tests.integration.worker.support import REGISTRY, Database, WorkerSpawner, eventually

from taskq import JobsClient, JobStatus

pytestmark = pytest.mark.integration


async def test_tune_a_running_workers_actor_live(
    db: Database, client: JobsClient, workers: WorkerSpawner, tmp_path: Path
) -> None:
    """max_concurrent 0 set on a running worker's actor holds its jobs back while other
    actors' jobs run; clearing it (unlimited) lets them run, with no restart."""
    env = operator_env(db)
    worker = workers.start(db.worker_env())
    try:

        async def row_exists() -> bool:
            run = await taskq("actor-config", "get", "record", "--json", env=env, cwd=tmp_path)
            return run.code == 0

        await eventually(row_exists, within=30, what="the worker's rows", interval=0.2)
        paused = await taskq(
            "actor-config",
            "set",
            "record",
            "--max-concurrent",
            "0",
            "--json",
            env=env,
            cwd=tmp_path,
        )
        assert paused.json()["max_concurrent"] == 0

        held = [await client.enqueue(record, Item(n=n)) for n in range(3)]
        other = await client.enqueue(record_once, Item(n=9))
        assert await other.wait(timeout=30) == 9  # the worker claims past the held jobs
        assert {await h.status() for h in held} == {JobStatus.PENDING}

        resumed = await taskq(
            "actor-config", "set", "record", "--clear-max-concurrent", env=env, cwd=tmp_path
        )
        assert resumed.code == 0, resumed
        assert "max_concurrent: unlimited" in resumed.out
        assert [await h.wait(timeout=30) for h in held] == [0, 1, 2]
        assert worker.returncode is None  # the same process all along
    finally:
        worker.send(signal.SIGTERM)
        await worker.wait(within=30)

    listed = (await taskq("actor-config", "list", "--json", env=env, cwd=tmp_path)).json()
    assert {"record", "record_once", "nap"} <= {c["actor"] for c in listed}
    assert {c["queue"] for c in listed} == {"default"}

    tuned = await taskq(
        "actor-config", "set", "record", "--max-pending", "7", env=env, cwd=tmp_path
    )
    assert tuned.code == 0, tuned
    diff = await taskq(
        "actor-config", "diff", "--actors", REGISTRY, "--json", env=env, cwd=tmp_path
    )
    assert [(d["actor"], d["kind"], d["field"], d["stored"]) for d in diff.json()] == [
        ("record", "override", "max_pending", 7)
    ]

    unknown = await taskq(
        "actor-config", "set", "nosuch", "--max-pending", "1", env=env, cwd=tmp_path
    )
    assert (unknown.code, unknown.out) == (1, "")
    assert unknown.err.startswith("taskq: actor 'nosuch' has no actor_config row")
