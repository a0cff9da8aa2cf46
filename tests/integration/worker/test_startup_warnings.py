"""Start-up WARNINGs for settings a worker accepts but would otherwise silently ignore."""

from __future__ import annotations

import pytest
from tests.integration.worker.support import Database, WorkerSpawner

pytestmark = pytest.mark.integration


async def test_inert_settings_set_by_the_operator_are_named_once(
    db: Database, workers: WorkerSpawner
) -> None:
    """TASKQ_DISPATCH_OVERSAMPLE is validated but not acted on yet: one
    worker-settings-inert WARNING names it (not the test env's TASKQ_HEALTH_ENABLED=false:
    turning off what is not there asks for nothing; nor TASKQ_WORKER_GROUP, which the
    CONSUMER spans carry), and the worker still runs."""
    env = db.worker_env(TASKQ_DISPATCH_OVERSAMPLE="3", TASKQ_WORKER_GROUP="billing")
    proc = workers.start(env, "--until-idle")
    assert await proc.wait(within=60) == 0, proc.output_tail()
    (inert,) = proc.events("worker-settings-inert")
    assert inert["level"] == "WARNING"
    assert inert["settings"] == ["TASKQ_DISPATCH_OVERSAMPLE"]


async def test_unknown_variables_empty_registry_and_comma_queues(
    db: Database, workers: WorkerSpawner
) -> None:
    """A TASKQ_* typo was silently ignored, an empty registry claimed nothing without a
    word, and '--queues a,b' consumed one queue literally named 'a,b'."""
    workers.log_dir.mkdir(parents=True, exist_ok=True)
    (workers.log_dir / "no_actors.py").write_text("registry: list[object] = []\n")
    env = db.worker_env(TASKQ_MAX_CONCURENCY="4")
    proc = workers.start(env, "--until-idle", "--queues", "a,b", registry="no_actors:registry")
    assert await proc.wait(within=60) == 0, proc.output_tail()
    (unknown,) = proc.events("worker-settings-unknown")
    assert unknown["variables"] == {"TASKQ_MAX_CONCURENCY": "TASKQ_MAX_CONCURRENCY"}
    assert len(proc.events("worker-registry-empty")) == 1
    (started,) = proc.events("worker-started")
    assert started["queues"] == ["a", "b"]


async def test_pooled_dsn_without_a_direct_dsn_refuses_to_start(
    db: Database, workers: WorkerSpawner
) -> None:
    """TASKQ_PG_IS_POOLED with no TASKQ_PG_DSN_DIRECT ran the leader lock and LISTEN
    through the pooler (two leaders); now the worker exits 1 naming the variable."""
    env = db.worker_env(TASKQ_PG_IS_POOLED="true")
    env.pop("TASKQ_PG_DSN_DIRECT", None)
    proc = workers.start(env, "--until-idle")
    assert await proc.wait(within=60) == 1, proc.output_tail()
    assert "TASKQ_PG_DSN_DIRECT" in proc.output_tail(), proc.output_tail()
