"""A job's TRANSIENT teardown runs after its actor and never changes its outcome."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Annotated

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, job, make_settings

from taskq import RetryPolicy
from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import ActorRef, actor
from taskq.app.di import Dependencies, Scope
from taskq.domain.status import JobStatus


class Empty(BaseModel):
    pass


class Session:
    pass


@actor
async def answer(payload: Empty, session: Annotated[Session, Scope.TRANSIENT]) -> int:
    return 42


@actor(retry=RetryPolicy(kind="non_retryable"))
async def refuse(payload: Empty, session: Annotated[Session, Scope.TRANSIENT]) -> int:
    raise ValueError("no")


async def _start(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    ref: ActorRef[Empty, int],
    deps: Dependencies,
) -> tuple[WorkerRun, int]:
    job_id = (await client.enqueue(ref.new_job({}, now=clock.now()))).job_id
    settings = make_settings(cancellation_grace_period=5, cleanup_grace_period=5)
    run = WorkerRun(backend, clock, {ref.name: ref}, settings, dependencies=deps)
    await run.start()
    await run.advance(1)
    return run, job_id


@pytest.mark.parametrize(
    ("ref", "status", "result"),
    [(answer, JobStatus.SUCCEEDED, 42), (refuse, JobStatus.FAILED, None)],
)
async def test_a_shutdown_during_a_slow_teardown_keeps_the_actors_outcome(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    ref: ActorRef[Empty, int],
    status: JobStatus,
    result: int | None,
) -> None:
    """The actor ended; its teardown takes 60 s; the shutdown forces the task at 5 s:
    the job keeps the actor's own outcome, not cancelled."""
    torn_down: list[str] = []

    async def slow_session() -> object:
        yield Session()
        torn_down.append("start")
        await clock.sleep(60)
        torn_down.append("end")

    deps = Dependencies()
    deps.register(Session, slow_session, scope=Scope.TRANSIENT)
    run, job_id = await _start(backend, clock, client, ref, deps)
    assert torn_down == ["start"]
    assert await run.stop(within=100) == 0
    stored = await job(client, job_id)
    assert stored.status is status
    assert stored.result == result
    assert torn_down == ["start", "end"]  # the close still waited for the teardown


@pytest.mark.parametrize("error", [SystemExit(3), KeyboardInterrupt()])
async def test_a_base_exception_in_a_teardown_is_logged_and_changes_nothing(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
    error: BaseException,
) -> None:
    def breaks_on_close() -> Iterator[Session]:
        yield Session()
        raise error

    deps = Dependencies()
    deps.register(Session, breaks_on_close, scope=Scope.TRANSIENT)
    run, job_id = await _start(backend, clock, client, answer, deps)
    assert await run.stop() == 0
    stored = await job(client, job_id)
    assert stored.status is JobStatus.SUCCEEDED
    assert stored.result == 42
    [failed] = [r for r in caplog.records if r.getMessage() == "di-teardown-failed"]
    assert type(error).__name__ in failed.error  # type: ignore[attr-defined]


async def test_a_failed_jobs_task_error_is_taken_not_left_for_asyncio_to_report(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """The outcome comes from the actor's own end, but the task's error must still be
    retrieved: else asyncio reports 'Task exception was never retrieved' on stderr
    for every failed job with dependencies."""
    reported: list[dict[str, object]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:

        def session() -> Iterator[Session]:
            yield Session()

        deps = Dependencies()
        deps.register(Session, session, scope=Scope.TRANSIENT)
        run, job_id = await _start(backend, clock, client, refuse, deps)
        assert await run.stop() == 0
        assert (await job(client, job_id)).status is JobStatus.FAILED
        gc.collect()  # a task's unretrieved error is reported when the task is freed
    finally:
        loop.set_exception_handler(None)
    assert [c.get("message") for c in reported] == []
