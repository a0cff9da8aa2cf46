"""A worker reads back the payload of an actor whose model has aliases, and its result
reads back through the handle: stored JSON and validation agree (by field name)."""

from __future__ import annotations

from pydantic import BaseModel, Field
from tests.unit.app.worker.harness import WorkerRun

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.domain.status import JobStatus


class Signup(BaseModel):
    user_id: int = Field(alias="userId")


class Welcome(BaseModel):
    greeting_text: str = Field(alias="greetingText")


@actor
async def on_signup(payload: Signup) -> Welcome:
    return Welcome(greetingText=f"hi {payload.user_id}")


async def test_an_aliased_payload_runs_and_its_result_reads_back(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Before, enqueue refused it ('userId Field required'); now the job succeeds."""
    job_id = (await client.enqueue(on_signup.new_job(Signup(userId=3), now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"on_signup": on_signup})
    await run.start()
    for _ in range(100):
        await run.advance(0.05)
        stored = await client.get(job_id)
        if stored is not None and stored.status.is_terminal:
            break
    assert stored is not None
    assert (stored.status, stored.result) == (JobStatus.SUCCEEDED, {"greeting_text": "hi 3"})
    assert on_signup.load_result(stored.result) == Welcome(greetingText="hi 3")
    assert await run.stop() == 0
