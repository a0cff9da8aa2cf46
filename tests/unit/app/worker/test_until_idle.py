"""Until-idle mode: drain detection, settle window and the exit codes 0, 3, 4 and 5."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, events_named, fields, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker import ExitCode, events, run_worker
from taskq.app.worker.protocols import Registry
from taskq.domain.actor_config import ActorConfig
from taskq.domain.job import NewJob
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Heartbeat, WorkerInfo


class Num(BaseModel):
    n: int


@actor
async def ok(payload: Num) -> int:
    return payload.n


@actor(retry=RetryPolicy(kind="non_retryable"))
async def broken(payload: Num) -> None:
    raise ValueError(f"bad {payload.n}")


REGISTRY: Registry = {"ok": ok, "broken": broken}


async def test_exit_0_once_drained_and_settled(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """All jobs succeeded: exit 0 once the queues read empty for the whole settle window."""
    for n in range(5):
        await client.enqueue(ok.new_job({"n": n}, now=clock.now()))
    settings = make_settings(idle_poll_interval=1.0, idle_settle_window=2.0)
    run = WorkerRun(backend, clock, REGISTRY, settings, until_idle=True)
    await run.start()  # the first poll (t=0) sees the jobs still active
    assert await client.count_active() == 0
    await run.advance(1)  # first empty read: the settle window starts
    await run.advance(1)
    assert run.task is not None
    assert not run.task.done()
    await run.advance(1)  # empty for 2 s
    assert run.task.done()
    assert run.task.result() == ExitCode.OK


async def test_exit_3_when_this_worker_failed_a_job(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A job this worker failed makes the drained exit code 3."""
    await client.enqueue(ok.new_job({"n": 1}, now=clock.now()))
    await client.enqueue(broken.new_job({"n": 2}, now=clock.now()))
    run = WorkerRun(
        backend, clock, REGISTRY, make_settings(idle_settle_window=0.0), until_idle=True
    )
    await run.start()
    assert await run.finish(within=5) == ExitCode.UNTIL_IDLE_FAILURES
    [drained] = events_named(caplog, events.UNTIL_IDLE_DRAINED)
    assert fields(drained) == {"drain_failures": 1, "exit_code": 3}


async def test_scheduled_jobs_count_as_active(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A job scheduled ahead keeps the worker up until it has run."""
    at = clock.now() + timedelta(seconds=30)
    job_id = (await client.enqueue(ok.new_job({"n": 1}, scheduled_at=at, now=clock.now()))).job_id
    run = WorkerRun(
        backend, clock, REGISTRY, make_settings(idle_settle_window=0.0), until_idle=True
    )
    await run.start()
    await run.advance(29)
    assert run.task is not None
    assert not run.task.done()
    assert await run.finish(within=5) == ExitCode.OK
    stored = await client.get(job_id)
    assert stored is not None
    assert stored.status is JobStatus.SUCCEEDED


async def test_exit_4_when_max_runtime_passes_first(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A far-future job and idle_max_runtime=60: the worker gives up at 60 s with exit 4."""
    at = clock.now() + timedelta(days=1)
    await client.enqueue(ok.new_job({"n": 1}, scheduled_at=at, now=clock.now()))
    run = WorkerRun(backend, clock, REGISTRY, make_settings(idle_max_runtime=60.0), until_idle=True)
    await run.start()
    await run.advance(59)
    assert run.task is not None
    assert not run.task.done()
    await run.advance(1)
    assert run.task.done()
    assert run.task.result() == ExitCode.UNTIL_IDLE_MAX_RUNTIME
    assert len(events_named(caplog, events.UNTIL_IDLE_MAX_RUNTIME)) == 1


async def test_run_worker_until_idle_on_a_fake_clock(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """run_worker(until_idle=True) with the memory ports returns 0 and leaves them open."""
    job_id = (await client.enqueue(ok.new_job({"n": 9}, now=clock.now()))).job_id
    store = backend.store()
    worker = asyncio.create_task(
        run_worker(
            make_settings(idle_settle_window=0.0),
            [ok],
            store=store,
            leader_lock=backend.leader_lock(),
            notifier=backend.notifier(),
            clock=clock,
            until_idle=True,
            handle_signals=False,
        )
    )
    while not worker.done():  # the application's test drives the fake clock
        await clock.advance_async(1)
    assert worker.result() == 0
    stored = await client.get(job_id)
    assert stored is not None
    assert stored.result == 9
    await store.ping()  # caller-owned: still open


async def test_exit_5_when_only_jobs_no_worker_can_run_are_left(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once the jobs it can run are done and only jobs of an actor no worker registers are
    left, the worker exits 5 after the settle window, naming actor, queue, count and why."""
    for n in range(3):
        await client.enqueue(ok.new_job({"n": n}, now=clock.now()))
    for _ in range(2):
        await client.enqueue(NewJob(actor="ghost", payload={}))
    settings = make_settings(idle_poll_interval=1.0, idle_settle_window=2.0, idle_max_runtime=600.0)
    run = WorkerRun(backend, clock, REGISTRY, settings, until_idle=True)
    await run.start()
    assert await client.count_active() == 2  # the ok jobs ran; the ghost jobs wait
    assert await run.finish(within=5) == ExitCode.UNTIL_IDLE_STRANDED
    assert int(ExitCode.UNTIL_IDLE_STRANDED) == 5
    [stranded] = events_named(caplog, events.UNTIL_IDLE_STRANDED)
    assert fields(stranded)["stranded"] == [
        {"actor": "ghost", "queue": "default", "waiting": 2, "reason": "unregistered"}
    ]
    assert fields(stranded)["exit_code"] == 5
    assert run.worker.problem is not None
    assert "actor 'ghost' on queue 'default': 2 waiting" in run.worker.problem
    assert not events_named(caplog, events.UNTIL_IDLE_MAX_RUNTIME)
    assert await client.count_active() == 2  # left as they were


async def test_a_job_it_can_still_run_keeps_it_from_exit_5(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A scheduled job of a registered actor next to a stranded one: the worker waits for it,
    runs it, and only then exits 5."""
    at = clock.now() + timedelta(seconds=30)
    job_id = (await client.enqueue(ok.new_job({"n": 1}, scheduled_at=at, now=clock.now()))).job_id
    await client.enqueue(NewJob(actor="ghost", payload={}))
    run = WorkerRun(
        backend, clock, REGISTRY, make_settings(idle_settle_window=0.0), until_idle=True
    )
    await run.start()
    await run.advance(29)
    assert run.task is not None
    assert not run.task.done()
    assert await run.finish(within=5) == ExitCode.UNTIL_IDLE_STRANDED
    stored = await client.get(job_id)
    assert stored is not None
    assert stored.status is JobStatus.SUCCEEDED


async def test_waits_while_another_live_worker_can_run_the_jobs(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Jobs this worker cannot run but a live peer registers keep it waiting (the queue is
    shared); once the peer has not been seen for a lock lease, the worker exits 5."""
    await client.sync_actor_configs([ActorConfig(actor="other", queue="default")])
    peer = WorkerInfo(worker_id="peer", hostname="h", pid=1, queues=["default"], actors=["other"])
    await client.register_worker(peer)
    await client.enqueue(NewJob(actor="other", payload={}))
    settings = make_settings(idle_settle_window=0.0, lock_lease=60.0)
    run = WorkerRun(backend, clock, REGISTRY, settings, until_idle=True)
    await run.start()
    await run.advance(40)
    await client.heartbeat(Heartbeat(worker_id="peer", lease=timedelta(seconds=60)))
    await run.advance(59)  # the peer was seen 59 s ago
    assert run.task is not None
    assert not run.task.done()
    assert await run.finish(within=3) == ExitCode.UNTIL_IDLE_STRANDED
    [stranded] = events_named(caplog, events.UNTIL_IDLE_STRANDED)
    assert fields(stranded)["stranded"] == [
        {"actor": "other", "queue": "default", "waiting": 1, "reason": "no_live_worker"}
    ]
