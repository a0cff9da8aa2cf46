"""The maintenance leader on a fake clock: one leader, sweeps, loss, daily prune."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import (
    WorkerRun,
    claim_one,
    events_named,
    fields,
    job,
    make_settings,
)

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker import events
from taskq.domain.actor_config import ActorConfig
from taskq.domain.job import NewJob
from taskq.domain.status import JobStatus
from taskq.ports.store_params import WorkerInfo


class Ping(BaseModel):
    n: int


@actor
async def pong(payload: Ping) -> int:
    return payload.n


REGISTRY = {"pong": pong}


def leading(run: WorkerRun) -> bool:
    """Whether the worker leads now (a call, so a type checker does not carry an earlier
    assertion about it past an await)."""
    return run.state.leadership.is_leader


async def test_only_one_of_two_workers_leads(backend: MemoryBackend, clock: FakeClock) -> None:
    """Two workers on one backend: exactly one is leader; when it stops, the other takes over."""
    first = WorkerRun(backend, clock, REGISTRY)
    second = WorkerRun(backend, clock, REGISTRY)
    await first.start()
    await second.start()
    assert (first.state.leadership.is_leader, second.state.leadership.is_leader) == (True, False)
    assert await first.stop() == 0
    await second.advance(10)  # the next election round
    assert second.state.leadership.is_leader
    assert await second.stop() == 0


async def test_the_leader_reclaims_a_dead_workers_job_as_its_lease_expires(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A dead worker's started job is re-pended the moment its lease expires (the attempt
    it was on counts), then run here as attempt 2."""
    job_id = (await client.enqueue(pong.new_job({"n": 3}, now=clock.now()))).job_id
    dead = backend.store()
    await dead.register_worker(
        WorkerInfo(worker_id="dead", hostname="h", pid=1, queues=["default"])
    )
    claimed = await claim_one(dead, worker_id="dead", queue="default", actor="pong", started=True)
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    assert (await job(client, job_id)).status is JobStatus.RUNNING
    await run.advance(60)  # the lease ends at 60: still held at 60 itself
    assert (await job(client, job_id)).status is JobStatus.RUNNING
    await run.advance(0.01)
    done = await job(client, job_id)
    assert done.status is JobStatus.SUCCEEDED
    assert done.attempt == 2
    assert done.fencing_token != claimed.fencing_token
    [reclaimed] = events_named(caplog, events.LEASES_RECLAIMED)
    assert fields(reclaimed) == {
        "repended": [job_id],
        "crashed": [],
        "cancelled": [],
        "unstarted": [],
    }
    [line] = events_named(caplog, events.JOB_RECLAIMED)  # and one line naming the job
    assert fields(line)["job_id"] == job_id
    assert (fields(line)["outcome"], fields(line)["started"]) == ("repended", True)
    await run.advance(120)  # two lock_leases without a heartbeat: the row is gone
    assert [w.worker_id for w in await client.list_workers()] == [run.worker.worker_id]
    assert await run.stop() == 0


async def test_lost_leadership_stops_the_sub_loops(
    backend: MemoryBackend, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """When the probe finds the lock gone, the worker stops leading and competes again."""
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    assert leading(run)
    lock = run.ports.leader_lock
    assert backend.leader.holder is lock
    backend.leader.holder = None  # the lock's session died server-side
    await run.advance(5)  # the next probe
    assert not leading(run)
    assert len(events_named(caplog, events.LEADER_LOST)) == 1
    await run.advance(10)  # the next election round wins again
    assert leading(run)
    assert await run.stop() == 0


@actor(queue="email")
async def mailer(payload: Ping) -> int:
    return payload.n


async def test_stranded_actors_are_reported(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Waiting jobs of an actor nobody registered are named (actor, queue, count, reason) in a
    warning 5 s after election, then every minute."""
    await client.enqueue(NewJob(actor="ghost", payload={}))
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    assert leading(run)
    await run.advance(5)
    [stranded] = events_named(caplog, events.STRANDED_ACTORS)
    assert fields(stranded)["actors"] == {"ghost": 1}
    assert fields(stranded)["stranded"] == [
        {"actor": "ghost", "queue": "default", "waiting": 1, "reason": "unregistered"}
    ]
    await run.advance(60)
    assert len(events_named(caplog, events.STRANDED_ACTORS)) == 2
    await run.stop()


async def test_stranded_warning_names_each_case_within_10s(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Within 10 s of election the warning names a never-registered actor, a retired one
    (actor_config row, no live worker registers it) and one whose queue no live worker
    consumes, each with its queue, count and which case applies."""
    await client.sync_actor_configs([ActorConfig(actor="retired", queue="default")])
    await client.enqueue(NewJob(actor="retired", payload={}))
    await client.enqueue(NewJob(actor="ghost", payload={}))
    for n in range(2):
        await client.enqueue(mailer.new_job({"n": n}, now=clock.now()))
    run = WorkerRun(backend, clock, {"pong": pong, "mailer": mailer})
    await run.start()
    assert leading(run)
    await run.advance(10)
    [stranded] = events_named(caplog, events.STRANDED_ACTORS)
    assert fields(stranded)["stranded"] == [
        {"actor": "ghost", "queue": "default", "waiting": 1, "reason": "unregistered"},
        {"actor": "mailer", "queue": "email", "waiting": 2, "reason": "queue_not_consumed"},
        {"actor": "retired", "queue": "default", "waiting": 1, "reason": "no_live_worker"},
    ]
    assert fields(stranded)["queues"] == ["default", "email"]
    assert fields(stranded)["actors"] == {"ghost": 1, "mailer": 2, "retired": 1}
    assert await run.stop() == 0


async def test_a_new_leader_warns_within_10s_of_taking_office(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """When the leader stops, the worker that takes over warns about a retired actor's waiting
    jobs within 10 s of its election, not a cadence later."""
    await client.sync_actor_configs([ActorConfig(actor="retired", queue="default")])
    await client.enqueue(NewJob(actor="retired", payload={}))
    first = WorkerRun(backend, clock, REGISTRY)
    second = WorkerRun(backend, clock, REGISTRY)
    await first.start()
    await second.start()
    await first.advance(20)
    assert len(events_named(caplog, events.STRANDED_ACTORS)) == 1  # the first leader's
    assert await first.stop(within=5) == 0
    waited = 0
    while not leading(second):
        await second.advance(1)
        waited += 1
        assert waited <= 10, "no new leader within a heartbeat interval"
    await second.advance(10)
    warnings = events_named(caplog, events.STRANDED_ACTORS)
    assert len(warnings) == 2
    assert fields(warnings[1])["stranded"] == [
        {"actor": "retired", "queue": "default", "waiting": 1, "reason": "no_live_worker"}
    ]
    assert await second.stop() == 0


async def test_deadline_sweep_fails_expired_waiting_jobs(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A scheduled job whose schedule_to_close passes before it runs is failed by the sweep
    (the client refuses such a job; a store may still hold one, written another way)."""
    now = clock.now()
    scheduled = pong.new_job({"n": 1}, scheduled_at=now + timedelta(hours=1), now=now)
    unrunnable = dataclasses.replace(scheduled, schedule_to_close=now + timedelta(seconds=40))
    job_id = (await client.enqueue(unrunnable)).job_id
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    await run.advance(60)
    assert (await job(client, job_id)).status is JobStatus.FAILED
    await run.stop()


async def test_prune_runs_daily_at_its_utc_time(caplog: pytest.LogCaptureFixture) -> None:
    """The prune sweep fires at TASKQ_PRUNE_SCHEDULE_UTC and archives old finished jobs."""
    clock = FakeClock(datetime(2030, 1, 1, 2, 0, tzinfo=UTC))
    backend = MemoryBackend(clock=clock)
    store = backend.store()
    job_id = (await store.enqueue(pong.new_job({"n": 1}, now=clock.now()))).job_id
    run = WorkerRun(
        backend,
        clock,
        REGISTRY,
        make_settings(prune_retention_succeeded="30m", archive_retention_period="2h"),
    )
    await run.start()
    assert (await job(store, job_id)).status is JobStatus.SUCCEEDED
    await run.advance(3600 - 1)  # 02:59:59
    assert events_named(caplog, events.PRUNE_COMPLETED) == []
    await run.advance(1)  # 03:00
    [pruned] = events_named(caplog, events.PRUNE_COMPLETED)
    assert fields(pruned) == {"archived": 1}
    assert await store.get(job_id) is None
    assert job_id in backend.archive
    await run.advance(3600)  # 04:00: the archive expiry (2 h retention not over yet)
    assert fields(events_named(caplog, events.ARCHIVE_EXPIRY_COMPLETED)[0]) == {"deleted": 0}
    await run.stop()
