"""A worker whose database goes silent as it is told to stop still leaves in time.

Every store call a stopping worker makes (start marks, the drain, outcome and
interruption writes, the leader's unlock, deregistering, closing the pools)
meets a dropped network here: none may hold the worker past its termination
budget, and the exit code is the graceful one (0), not the watchdog's (2).
What it could not write is left to the leases: another worker runs every job
once they expire.
"""

from __future__ import annotations

import signal
import time

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import SIDE_EFFECTS_DSN, Item, block_first, record
from tests.integration.worker.proxy import faulty_proxy
from tests.integration.worker.support import Database, WorkerSpawner, eventually, status_counts

from taskq import JobsClient

pytestmark = pytest.mark.integration

TERMINATION = 10.0
#: Long enough that the failing beats do not isolate the worker (exit 1) before its
#: shutdown ends (isolation comes once a beat could no longer land inside the lease).
LEASE = 20.0
ENV = {
    "TASKQ_LOCK_LEASE": str(LEASE),
    "TASKQ_HEARTBEAT_INTERVAL": "1",
    "TASKQ_HEARTBEAT_COMMAND_TIMEOUT": "1",
    # Beats fail throughout: the shutdown, not isolate-self, must end this worker.
    "TASKQ_MAX_HEARTBEAT_FAILURES": "100",
    "TASKQ_TERMINATION_GRACE_PERIOD": str(TERMINATION),
    "TASKQ_MAX_CONCURRENCY": "2",
    "TASKQ_NOTIFY_HEALTH_CHECK_INTERVAL": "0.5",
}
#: Room past the termination budget for a loaded machine (process start-up is not in it:
#: the clock starts at the signal).
MARGIN = 5.0
#: Registers none of the test's actors: it leads (reclaims) and runs nothing.
BYSTANDER_REGISTRY = "tests.integration.worker.json_actors_fixture:registry"
JOBS = 4


async def test_a_worker_partitioned_as_it_stops_exits_in_time_and_its_jobs_run_elsewhere(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    leader = workers.start(db.worker_env(**ENV), registry=BYSTANDER_REGISTRY)

    async def leads() -> bool:
        return bool(leader.events("leader-elected"))

    await eventually(leads, within=30, what="the bystander to lead", context=leader.output_tail)
    async with faulty_proxy(db.dsn) as proxy:
        victim = workers.start(
            db.worker_env(**ENV, TASKQ_PG_DSN=proxy.dsn_for(db.dsn), **{SIDE_EFFECTS_DSN: db.dsn})
        )
        # Two jobs run (deaf to the stop: each is cancelled, then its interruption
        # written), two more wait claimed in its queue (the drain's to give back).
        for n in range(2):
            await client.enqueue(block_first, Item(n=n))

        async def running(n: int) -> bool:
            return (await conn.fetchval(f"SELECT count(*) FROM {db.schema}.side_effects") or 0) >= n

        await eventually(
            lambda: running(2), within=30, what="two jobs to start", context=victim.output_tail
        )
        for n in range(2, JOBS):
            await client.enqueue(record, Item(n=n))

        async def all_claimed() -> bool:
            return (await status_counts(conn, db.schema)).get("running", 0) == JOBS

        await eventually(
            all_claimed, within=30, what="two jobs claimed ahead", context=victim.output_tail
        )
        proxy.blackhole()
        victim.send(signal.SIGTERM)
        sent = time.monotonic()
        code = await victim.wait(within=TERMINATION + 30)
        took = time.monotonic() - sent
    print(f"[{db.driver}] exit {code} {took:.1f}s after SIGTERM")
    assert code == 0, victim.output_tail(60)
    assert took < TERMINATION + MARGIN, (took, victim.output_tail(60))
    assert not victim.events("worker-watchdog-trip"), victim.output_tail(60)

    rerunner = workers.start(db.worker_env(**ENV))

    async def all_succeeded() -> bool:
        return (await status_counts(conn, db.schema)).get("succeeded", 0) == JOBS

    restarted = time.monotonic()
    await eventually(
        all_succeeded,
        within=LEASE + 60,
        what="every job to run again elsewhere",
        context=lambda: leader.output_tail(20) + "\n" + rerunner.output_tail(),
    )
    print(f"[{db.driver}] every job succeeded {time.monotonic() - restarted:.1f}s later")
