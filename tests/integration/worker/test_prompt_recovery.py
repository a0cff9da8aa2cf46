"""Prompt recovery with real worker processes: a killed worker's job runs again within
lock_lease + 1 s of its last heartbeat, and an idle worker whose connections are all
terminated starts a new job within a second."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import SIDE_EFFECTS_DSN, Item, block_first, record
from tests.integration.worker.support import (
    SLOW_POLLS,
    Database,
    WorkerProcess,
    WorkerSpawner,
    eventually,
    wait_until_listening,
)

from taskq import JobsClient

pytestmark = pytest.mark.integration

#: Lease 5 s with a 1 s heartbeat (lease >= 4 x heartbeat); grace periods fit the lease,
#: and so does a beat's command timeout (2 s < 5 s).
SHORT_LEASE = 5.0
SHORT_LEASE_ENV = {
    "TASKQ_LOCK_LEASE": "5",
    "TASKQ_HEARTBEAT_INTERVAL": "1",
    "TASKQ_HEARTBEAT_COMMAND_TIMEOUT": "2",
}
#: Registers neither block_first nor record: a leader that never runs the test's job.
BYSTANDER_REGISTRY = "tests.integration.worker.json_actors_fixture:registry"


async def _leads(worker: WorkerProcess) -> None:
    async def elected() -> bool:
        return bool(worker.events("leader-elected"))

    await eventually(elected, within=30, what=f"{worker.name} to lead", context=worker.output_tail)


async def _registered(conn: asyncpg.Connection, db: Database, worker: WorkerProcess) -> None:
    async def seen() -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT count(*) FROM {db.schema}.workers WHERE pid = $1", worker.pid
            )
        )

    await eventually(seen, within=30, what=f"{worker.name} to register", context=worker.output_tail)


async def _first_attempt_running_on(
    conn: asyncpg.Connection, db: Database, job_id: int, worker: WorkerProcess
) -> None:
    async def running() -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT count(*) FROM {db.schema}.jobs j "
                f"JOIN {db.schema}.side_effects s ON s.job_id = j.id AND s.attempt = 1 "
                "WHERE j.id = $1 AND j.status = 'running' AND s.worker_pid = $2",
                job_id,
                worker.pid,
            )
        )

    await eventually(
        running, within=30, what="attempt 1 to start on the victim", context=worker.output_tail
    )


async def _kill_and_time_the_rerun(
    conn: asyncpg.Connection,
    db: Database,
    job_id: int,
    victim: WorkerProcess,
    rerunner: WorkerProcess,
) -> timedelta:
    """SIGKILL ``victim`` once a heartbeat has extended the job's lease; how long after the
    job's lock at the death attempt 2 started (checked against the last beat too)."""

    async def beaten_since_the_claim() -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT j.lock_expires_at = w.last_seen_at + $3::float8 * interval '1 second' "
                f"FROM {db.schema}.jobs j JOIN {db.schema}.workers w ON w.worker_id = j.locked_by "
                "WHERE j.id = $1 AND w.pid = $2",
                job_id,
                victim.pid,
                SHORT_LEASE,
            )
        )

    await eventually(
        beaten_since_the_claim, within=30, what="a heartbeat", context=victim.output_tail
    )
    victim.kill_if_running()
    assert victim.returncode == -9
    await asyncio.sleep(0.2)  # a heartbeat commit already on its way lands, or never does
    lock_at_death: datetime | None = await conn.fetchval(
        f"SELECT lock_expires_at FROM {db.schema}.jobs WHERE id = $1 AND status = 'running'",
        job_id,
    )
    assert lock_at_death is not None, "the job was reclaimed before the lease could have ended"
    last_seen: datetime = await conn.fetchval(
        f"SELECT last_seen_at FROM {db.schema}.workers WHERE pid = $1", victim.pid
    )

    async def second_attempt_started() -> datetime | None:
        started: datetime | None = await conn.fetchval(
            f"SELECT started_at FROM {db.schema}.jobs "
            "WHERE id = $1 AND attempt = 2 AND started_at IS NOT NULL",
            job_id,
        )
        return started

    started = await eventually(
        second_attempt_started,
        within=30 + SHORT_LEASE,
        what="attempt 2 to start",
        context=rerunner.output_tail,
    )
    assert started is not None

    async def ran_on() -> int | None:
        # started_at is the claim's time: the actor's own row lands a moment later.
        pid: int | None = await conn.fetchval(
            f"SELECT worker_pid FROM {db.schema}.side_effects WHERE job_id = $1 AND attempt = 2",
            job_id,
        )
        return pid

    assert await eventually(ran_on, within=10, what="attempt 2's run") == rerunner.pid
    print(
        f"[{db.driver}] last heartbeat {last_seen.isoformat()}, lock {lock_at_death.isoformat()}, "
        f"attempt 2 started {(started - lock_at_death).total_seconds():.3f}s after the lock "
        f"({(started - last_seen).total_seconds():.3f}s after the last heartbeat)"
    )
    assert started - last_seen < timedelta(seconds=SHORT_LEASE + 1)
    return started - lock_at_death


async def test_a_killed_leaders_job_runs_again_within_the_lease_and_a_second(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """kill -9 of the leader holding a running job (lease 5 s, heartbeat 1 s): the worker
    elected next re-pends it and it starts again within 1 s of the lease's end."""
    env = db.worker_env(**SHORT_LEASE_ENV)
    victim = workers.start(env)
    await _leads(victim)
    job_id = (await client.enqueue(block_first, Item(n=1))).job_id
    await _first_attempt_running_on(conn, db, job_id, victim)
    survivor = workers.start(env)
    await _registered(conn, db, survivor)

    late = await _kill_and_time_the_rerun(conn, db, job_id, victim, survivor)

    assert survivor.events("leader-elected"), survivor.output_tail()
    assert late < timedelta(seconds=1), survivor.output_tail()


async def test_a_killed_workers_job_runs_again_within_the_lease_and_a_second(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """kill -9 of a worker that does not lead, holding a running job (lease 5 s, heartbeat
    1 s): the leader re-pends it and another worker starts it within 1 s of the lease's end."""
    env = db.worker_env(**SHORT_LEASE_ENV)
    leader = workers.start(env, registry=BYSTANDER_REGISTRY)
    await _leads(leader)
    victim = workers.start(env)
    await _registered(conn, db, victim)
    job_id = (await client.enqueue(block_first, Item(n=1))).job_id
    await _first_attempt_running_on(conn, db, job_id, victim)
    rerunner = workers.start(env)
    await _registered(conn, db, rerunner)

    late = await _kill_and_time_the_rerun(conn, db, job_id, victim, rerunner)

    assert not victim.events("leader-elected")
    assert late < timedelta(seconds=1), leader.output_tail()
    assert leader.returncode is None


ROUNDS = 3


async def test_an_idle_worker_whose_connections_are_killed_starts_a_new_job_within_a_second(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """pg_terminate_backend of every session of an idle worker, then an enqueue: the job
    starts within 1 s (polls are minutes apart, so the listener's prompt return does it)."""
    app = f"taskq-{db.schema}"
    separator = "&" if "?" in db.dsn else "?"
    worker = workers.start(
        db.worker_env(
            **SLOW_POLLS,
            TASKQ_PG_DSN=f"{db.dsn}{separator}application_name={app}",
            # The actor's side-effect rows are the test's, not on a session it kills.
            **{SIDE_EFFECTS_DSN: db.dsn},
        )
    )
    await wait_until_listening(conn, db.schema, context=worker.output_tail)
    latencies = []
    for n in range(ROUNDS):
        await asyncio.sleep(1.0)  # idle: no statement in flight
        killed = await conn.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1",
            app,
        )
        assert killed >= 3  # at least the pool's, the leader lock's and the LISTEN session
        job_id = (await client.enqueue(record, Item(n=n))).job_id

        async def started(job_id: int = job_id) -> float | None:
            latency = await conn.fetchval(
                f"SELECT extract(epoch FROM started_at - created_at) FROM {db.schema}.jobs "
                "WHERE id = $1 AND started_at IS NOT NULL",
                job_id,
            )
            return None if latency is None else float(latency)

        latency = await eventually(
            started, within=30, what=f"job {n} to start", context=worker.output_tail
        )
        assert latency is not None
        latencies.append(latency)
    print(f"[{db.driver}] enqueue->start after the kill: {[f'{x:.3f}s' for x in latencies]}")
    assert max(latencies) < 1.0, worker.output_tail()
    assert worker.returncode is None
