"""A dependency factory that raises is reported naming the dependency, actor and parameter."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, job

from taskq import RetryPolicy
from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.di import Dependencies, Scope
from taskq.domain.status import JobStatus


class Empty(BaseModel):
    pass


class Pool:
    pass


@actor
async def pooled(payload: Empty, pool: Annotated[Pool, Scope.PROCESS]) -> None: ...


@actor(retry=RetryPolicy(max_attempts=1))
async def per_job(payload: Empty, pool: Annotated[Pool, Scope.TRANSIENT]) -> None: ...


def broken() -> Pool:
    return 1 / 0  # type: ignore[return-value]


async def test_a_failing_process_factory_refuses_the_start_naming_who_needs_it(
    backend: MemoryBackend, clock: FakeClock
) -> None:
    deps = Dependencies()
    deps.register(Pool, broken, scope=Scope.PROCESS)
    run = WorkerRun(backend, clock, {"pooled": pooled}, dependencies=deps)
    assert await run.worker.run() == 1
    assert run.worker.problem == (
        "opening the actor dependency scopes failed: the factory of Pool at PROCESS scope "
        "raised ZeroDivisionError: division by zero (needed by actor 'pooled', parameter 'pool')"
    )


async def test_a_failing_transient_factory_fails_the_job_naming_it(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    deps = Dependencies()
    deps.register(Pool, broken, scope=Scope.TRANSIENT)
    job_id = (await client.enqueue(per_job.new_job({}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"per_job": per_job}, dependencies=deps)
    await run.start()
    await run.advance(1)
    assert await run.stop() == 0
    stored = await job(client, job_id)
    assert stored.status is JobStatus.FAILED
    assert stored.last_error is not None
    assert (
        "actor 'per_job', parameter 'pool': the factory of Pool at TRANSIENT scope raised "
        "ZeroDivisionError: division by zero"
    ) in stored.last_error
