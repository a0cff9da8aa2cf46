"""JobsClient on its own pool, round trip through a real worker on the same database."""

from __future__ import annotations

import asyncio

import pytest
from tests.integration.client.client_actors import Pair, Total, add, registry
from tests.integration.worker.support import Database

from taskq import JobsClient, JobStatus, StoreUnavailable, WorkerSettings
from taskq.app.worker import run_worker

pytestmark = pytest.mark.integration

#: Nothing listens on port 1; the password must never show up in the error.
UNREACHABLE_DSN = "postgresql://postgres:sekret@127.0.0.1:1/test"


def worker_settings(db: Database) -> WorkerSettings:
    """An in-process worker on the test schema that exits as soon as the queue is empty."""
    return WorkerSettings.load_from_dict(
        {
            "pg_dsn": db.dsn,
            "schema_name": db.schema,
            "driver": db.driver,
            "heartbeat_interval": 0.5,
            "lock_lease": 3,
            "heartbeat_command_timeout": 1,
            "cancellation_grace_period": 1,
            "cleanup_grace_period": 1,
            "termination_grace_period": 10,
            "health_enabled": False,
            "watchdog_enabled": False,
            "idle_settle_window": 0,
            "idle_poll_interval": 0.1,
            "dispatcher_pool_size": 2,
            "heartbeat_pool_size": 1,
        }
    )


async def test_connect_round_trip_returns_the_typed_result(db: Database) -> None:
    """connect(dsn, driver=, schema=) enqueues; a real worker runs it; wait() returns the model."""
    async with JobsClient.connect(db.dsn, driver=db.driver, schema=db.schema) as client:
        handle = await client.enqueue(add, Pair(a=2, b=40))
        assert await handle.status() is JobStatus.PENDING
        worker = asyncio.create_task(
            run_worker(worker_settings(db), registry, until_idle=True, handle_signals=False)
        )
        try:
            result = await handle.wait(timeout=30)
        finally:
            code = await asyncio.wait_for(worker, timeout=30)
        assert result == Total(value=42)
        assert isinstance(result, Total)
        assert code == 0
        job = await client.get(handle.job_id)
        assert job is not None
        assert job.status is JobStatus.SUCCEEDED
        assert job.result == {"value": 42}


async def test_unreachable_database_raises_store_unavailable(driver: str) -> None:
    """A client whose database refuses connections raises StoreUnavailable naming the address."""
    with pytest.raises(StoreUnavailable) as caught:
        async with JobsClient.connect(UNREACHABLE_DSN, driver=driver, schema="taskq") as client:
            await client.enqueue(add, Pair(a=1, b=1))
    message = str(caught.value)
    print(f"[{driver}] {message}")
    assert "127.0.0.1:1" in message
    assert "sekret" not in message
