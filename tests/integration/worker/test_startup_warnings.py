"""Start-up WARNINGs for settings a worker accepts but would otherwise silently ignore."""

from __future__ import annotations

import pytest
from tests.integration.worker.support import Database, WorkerSpawner

pytestmark = pytest.mark.integration


async def test_inert_settings_set_by_the_operator_are_named_once(
    db: Database, workers: WorkerSpawner
) -> None:
    """TASKQ_WORKER_GROUP (and the test env's TASKQ_HEALTH_ENABLED=false) are validated but
    not acted on yet: one worker-settings-inert WARNING names each, the worker still runs."""
    proc = workers.start(db.worker_env(TASKQ_WORKER_GROUP="billing"), "--until-idle")
    assert await proc.wait(within=60) == 0, proc.output_tail()
    (inert,) = proc.events("worker-settings-inert")
    assert inert["level"] == "WARNING"
    assert inert["settings"] == ["TASKQ_HEALTH_ENABLED", "TASKQ_WORKER_GROUP"]
