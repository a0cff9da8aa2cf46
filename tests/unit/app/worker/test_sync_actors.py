"""Plain ``def`` actors run in threads of the worker's own, ``max_concurrency`` of them."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.domain.status import JobStatus


class Item(BaseModel):
    n: int


#: Every job waits here until all of them run at once (or the barrier breaks: a failure).
MEETING: list[threading.Barrier] = []
THREADS: set[str] = set()


@actor
def rendezvous(payload: Item) -> None:
    THREADS.add(threading.current_thread().name)
    MEETING[0].wait()


async def test_max_concurrency_sync_jobs_run_at_once(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """More sync jobs than asyncio's default thread pool holds (cpu count + 4) run
    together, each in a thread of the worker's own pool: one whose jobs block on each
    other all complete, and the loop's default pool (asyncio's DNS lookups among its
    users) is left alone."""
    count = (os.cpu_count() or 1) + 5
    MEETING[:] = [threading.Barrier(count, timeout=10)]
    THREADS.clear()
    ids = [
        (await client.enqueue(rendezvous.new_job({"n": n}, now=clock.now()))).job_id
        for n in range(count)
    ]
    settings = make_settings(max_concurrency=count, notify_enabled=False, poll_interval=60.0)
    run = WorkerRun(backend, clock, {"rendezvous": rendezvous}, settings)
    await run.start()

    async def statuses() -> list[JobStatus]:
        return [job.status for i in ids if (job := await client.get(i)) is not None]

    for _ in range(1_500):  # real time: the jobs run in real threads
        if await statuses() == [JobStatus.SUCCEEDED] * count:
            break
        await asyncio.sleep(0.01)
        await clock.run_until_idle()
    assert await statuses() == [JobStatus.SUCCEEDED] * count
    assert len(THREADS) == count, THREADS
    assert all(name.startswith("taskq-actor") for name in THREADS), THREADS
    assert await run.stop() == 0


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


@actor
def reads_context(payload: Item) -> str:
    return f"{REQUEST_ID.get()} in {threading.current_thread().name}"


async def test_a_sync_actor_in_a_given_pool_sees_the_callers_context() -> None:
    """Run in the worker's pool, a sync actor sees the context variables of the task that
    runs it, as ``asyncio.to_thread`` would give it."""
    REQUEST_ID.set("req-7")
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="given") as pool:
        result = await reads_context.run(Item(n=1), None, {}, executor=pool)
    assert result == "req-7 in given_0"
