"""A real ``taskq worker`` process exports its OpenTelemetry metrics through the SDK its
actors module configured, with TASKQ_WORKER_GROUP on every point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.integration.worker.metered_actors_fixture import METRICS_FILE, counted, refused
from tests.integration.worker.support import Database, WorkerSpawner

from taskq import JobsClient

pytestmark = pytest.mark.integration

REGISTRY = "tests.integration.worker.metered_actors_fixture:registry"


def _last_export(path: Path) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records, "the worker exported no metrics"
    last = max(record["export"] for record in records)
    return [record for record in records if record["export"] == last]


async def test_a_worker_process_exports_its_metrics_with_the_worker_group(
    db: Database, workers: WorkerSpawner, tmp_path: Path
) -> None:
    """Three jobs succeed and one fails in a worker run until idle: the exported counter
    says so by actor, queue and outcome, the duration histogram counts the four attempts,
    the claims add up to the four jobs, and every point carries the worker group; the SDK's
    periodic reader is flushed as the process exits."""
    metrics_file = tmp_path / "worker-metrics.jsonl"
    async with JobsClient.connect(settings=db.settings()) as client:
        for n in range(3):
            await client.enqueue(counted, {"n": n})
        await client.enqueue(refused, {"n": 9})

    env = db.worker_env(TASKQ_WORKER_GROUP="metrics-test", **{METRICS_FILE: str(metrics_file)})
    proc = workers.start(env, "--until-idle", registry=REGISTRY)
    assert await proc.wait(within=90) == 3, proc.output_tail()  # 3: a job failed

    points = _last_export(metrics_file)
    assert {p["attributes"]["messaging.consumer.group.name"] for p in points} == {"metrics-test"}
    attempts = {
        (
            p["attributes"]["messaging.taskq.actor"],
            p["attributes"]["messaging.destination.name"],
            p["attributes"]["messaging.taskq.job.outcome"],
        ): p["value"]
        for p in points
        if p["name"] == "taskq.worker.attempts_total"
    }
    assert attempts == {("counted", "default", "succeeded"): 3, ("refused", "default", "failed"): 1}
    durations = {
        p["attributes"]["messaging.taskq.actor"]: p["count"]
        for p in points
        if p["name"] == "taskq.worker.attempt_duration_seconds"
    }
    assert durations == {"counted": 3, "refused": 1}
    [batches] = [p for p in points if p["name"] == "taskq.worker.claim_batch_jobs"]
    assert batches["sum"] == 4
    [claims] = [p for p in points if p["name"] == "taskq.worker.claim_duration_seconds"]
    assert claims["count"] == batches["count"]
    [shutdown] = [p for p in points if p["name"] == "taskq.worker.shutdown_duration_seconds"]
    assert shutdown["count"] == 1
