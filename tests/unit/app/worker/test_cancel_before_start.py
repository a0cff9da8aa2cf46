"""A cancel that reaches a job before its actor was called: it never runs (fake clock).

A job claimed ahead waits in the worker's local queue while its row is running:
a cancel only marks it (cancel phase COOPERATIVE). The next heartbeat takes it
out of the queue and gives it back unrun, and the store ends it cancelled. A job
a consumer took whose start mark is under way when the cancel arrives is not
invoked either.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import (
    StoreProxy,
    WorkerRun,
    events_named,
    fields,
    job,
    make_settings,
)

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker import events
from taskq.app.worker.protocols import Registry
from taskq.domain.job import Lease
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus


class Item(BaseModel):
    n: int


RUNS: Counter[int] = Counter()
RELEASE = asyncio.Event()


@pytest.fixture(autouse=True)
def _reset() -> None:
    global RELEASE
    RELEASE = asyncio.Event()
    RUNS.clear()


@actor
async def work(payload: Item) -> int:
    """Runs until RELEASE; does not look at its cancel event."""
    RUNS[payload.n] += 1
    await RELEASE.wait()
    return payload.n


@actor(retry=RetryPolicy(kind="non_retryable"))
async def once(payload: Item) -> int:
    """Gated (non_retryable, claimed ahead): runs once its start mark landed."""
    RUNS[payload.n] += 1
    return payload.n


REGISTRY: Registry = {"work": work, "once": once}
#: One consumer: a second job waits in the local queue, claimed but not started.
SETTINGS = {"max_concurrency": 1, "heartbeat_interval": 10}


async def test_a_cancelled_job_waiting_in_the_local_queue_never_runs(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With job 1 running and job 2 claimed into the queue, a cancel of job 2 is acted on
    by the next heartbeat: job 2 is given back unrun and ends cancelled (logged with its
    actor and queue); job 1 goes on and succeeds."""
    first = (await client.enqueue(work.new_job({"n": 1}, now=clock.now()))).job_id
    second = (await client.enqueue(work.new_job({"n": 2}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, make_settings(**SETTINGS))
    await run.start()
    await run.advance(1)
    assert [j.id for j in run.state.local_queue.snapshot()] == [second]
    assert (await job(client, second)).status is JobStatus.RUNNING
    assert await client.request_cancel(second) is JobStatus.RUNNING

    await run.advance(10)  # the next heartbeat
    cancelled = await job(client, second)
    assert (cancelled.status, cancelled.locked_by) == (JobStatus.CANCELLED, None)
    assert run.state.local_queue.snapshot() == []
    [asked] = events_named(caplog, events.JOB_CANCEL_REQUESTED)
    assert fields(asked)["job_id"] == second
    assert (fields(asked)["actor"], fields(asked)["queue"]) == ("work", "default")
    assert events_named(caplog, events.JOB_ORPHAN_RELEASED) == []

    RELEASE.set()
    await run.advance(20)
    assert (await job(client, first)).status is JobStatus.SUCCEEDED
    assert (await job(client, second)).status is JobStatus.CANCELLED
    assert Counter({1: 1}) == RUNS
    assert await run.stop() == 0


class HeldMarks(StoreProxy):
    """The memory store whose start marks wait for ``release`` (a slow round trip)."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.release = asyncio.Event()
        self.marked: list[int] = []

    async def mark_started(self, leases: Sequence[Lease], **kwargs: Any) -> list[Lease]:
        self.marked.extend(lease.job_id for lease in leases)
        await self.release.wait()
        return await self._inner.mark_started(leases, **kwargs)


async def test_a_gated_job_cancelled_while_its_start_mark_is_under_way_is_not_invoked(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Job 2 (non_retryable, claimed ahead) is taken by the consumer once job 1 ends and
    waits for its start mark; a heartbeat delivers its cancel meanwhile: once the mark
    lands its actor is not called, and it ends cancelled. (Beats every 2 s: the mark is
    under way for less than TASKQ_HEARTBEAT_COMMAND_TIMEOUT, past which it is given up.)"""
    store = HeldMarks(backend.store())
    first = (await client.enqueue(work.new_job({"n": 1}, now=clock.now()))).job_id
    second = (await client.enqueue(once.new_job({"n": 2}, now=clock.now()))).job_id
    settings = make_settings(**{**SETTINGS, "heartbeat_interval": 2})
    run = WorkerRun(backend, clock, REGISTRY, settings, store=store)
    await run.start()
    await run.advance(1)
    RELEASE.set()
    await run.advance(1)
    assert (await job(client, first)).status is JobStatus.SUCCEEDED
    assert store.marked == [second]  # the consumer holds job 2, waiting for its mark
    assert second in run.state.active
    assert await client.request_cancel(second) is JobStatus.RUNNING

    await run.advance(3)  # the next heartbeat: the cancel reaches the waiting job
    assert [fields(r)["job_id"] for r in events_named(caplog, events.JOB_CANCEL_REQUESTED)] == [
        second
    ]
    store.release.set()
    await run.advance(1)
    ended = await job(client, second)
    assert (ended.status, ended.locked_by) == (JobStatus.CANCELLED, None)
    assert Counter({1: 1}) == RUNS
    assert await run.stop() == 0


class HangingRelease(StoreProxy):
    """The memory store whose release never answers (a row another session holds
    locked), and whose cancellation is not acknowledged until the test ends."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.end = asyncio.Event()

    async def release(self, lease: Lease, **kwargs: Any) -> None:
        while not self.end.is_set():
            try:
                await self.end.wait()
            except asyncio.CancelledError:
                continue
        raise ConnectionResetError("gone")


async def test_a_release_that_does_not_answer_does_not_hold_up_the_heartbeat(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The release of a cancelled queued job that never answers is given up after
    TASKQ_HEARTBEAT_COMMAND_TIMEOUT (job-write-failed): the next beats still extend the
    running job's lease on time."""
    store = HangingRelease(backend.store())
    first = (await client.enqueue(work.new_job({"n": 1}, now=clock.now()))).job_id
    second = (await client.enqueue(work.new_job({"n": 2}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, REGISTRY, make_settings(**SETTINGS), store=store)
    try:
        await run.start()
        await run.advance(1)
        await client.request_cancel(second)
        for second_passed in range(60):
            await run.advance(1)
            running = await job(client, first)
            # Beats every 10 s, each at most 5 s late (the release given up, and later
            # the orphan release of the same job): the 60 s lease keeps 40 s ahead.
            assert running.lock_expires_at is not None
            assert running.lock_expires_at - clock.now() >= timedelta(seconds=40), second_passed
        failed = events_named(caplog, events.JOB_WRITE_FAILED)
        assert fields(failed[0])["job_id"] == second
        assert fields(failed[0])["write"] == "release-cancelled"
        assert "TASKQ_HEARTBEAT_COMMAND_TIMEOUT=5s" in fields(failed[0])["error"]
        assert Counter({1: 1}) == RUNS
    finally:
        store.end.set()
    RELEASE.set()
    await run.stop()
