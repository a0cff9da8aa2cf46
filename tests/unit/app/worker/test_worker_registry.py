"""Worker takes the registry in the forms run_worker does."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, job

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.domain.errors import RegistryError
from taskq.domain.status import JobStatus


class Number(BaseModel):
    n: int


@actor
async def double(payload: Number) -> int:
    return payload.n * 2


@pytest.mark.parametrize("registry", [[double], (double,), {"double": double}])
async def test_worker_runs_a_list_tuple_or_mapping_registry(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore, registry: object
) -> None:
    job_id = (await client.enqueue(double.new_job({"n": 21}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, registry)  # type: ignore[arg-type]
    await run.start()
    await run.advance(1)
    assert await run.stop() == 0
    stored = await job(client, job_id)
    assert (stored.status, stored.result) == (JobStatus.SUCCEEDED, 42)


def test_worker_refuses_a_single_actor_clearly(backend: MemoryBackend, clock: FakeClock) -> None:
    with pytest.raises(RegistryError, match=r"wrap it in a list: \[double\]"):
        WorkerRun(backend, clock, double)  # type: ignore[arg-type]
