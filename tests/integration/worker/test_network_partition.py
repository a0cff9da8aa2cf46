"""A worker cut off from the database by the network, not by the server.

A silent partition (packets dropped, nothing closed) must not hang the
heartbeat: every beat is bounded, the worker isolates itself and exits 1
before its jobs' leases lapse. An outage (connections refused) must not hold
up isolate-self or a SIGTERM until the termination deadline.
"""

from __future__ import annotations

import asyncio
import signal
import time

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import SIDE_EFFECTS_DSN, Nap, nap
from tests.integration.worker.proxy import faulty_proxy
from tests.integration.worker.support import Database, WorkerSpawner, eventually

from taskq import JobsClient

pytestmark = pytest.mark.integration

#: Lease 10 s: four failed beats (0.5 s apart, each given up after 0.5 s) and the
#: isolation fit well inside it. Termination 30 s: far beyond what a prompt exit takes.
PARTITION_ENV = {
    "TASKQ_HEARTBEAT_INTERVAL": "0.5",
    "TASKQ_HEARTBEAT_COMMAND_TIMEOUT": "0.5",
    "TASKQ_MAX_HEARTBEAT_FAILURES": "3",
    # Well above the few seconds isolation takes, so a loaded machine cannot make the
    # exit look late; the test is that the worker is gone before the lease lapses.
    "TASKQ_LOCK_LEASE": "20",
    "TASKQ_TERMINATION_GRACE_PERIOD": "30",
    "TASKQ_NOTIFY_POLL_INTERVAL": "0.5",
    "TASKQ_NOTIFY_HEALTH_CHECK_INTERVAL": "0.5",
}


async def _running(conn: asyncpg.Connection, db: Database) -> bool:
    return bool(await conn.fetchval(f"SELECT count(*) FROM {db.schema}.side_effects"))


@pytest.mark.parametrize("fault", ["blackhole", "refuse"])
async def test_a_cut_off_worker_isolates_itself_and_exits_1_before_its_lease_lapses(
    fault: str,
    db: Database,
    conn: asyncpg.Connection,
    client: JobsClient,
    workers: WorkerSpawner,
) -> None:
    async with faulty_proxy(db.dsn) as proxy:
        worker = workers.start(
            db.worker_env(
                **PARTITION_ENV,
                TASKQ_PG_DSN=proxy.dsn_for(db.dsn),
                **{SIDE_EFFECTS_DSN: db.dsn},
            )
        )
        await client.enqueue(nap, Nap(seconds=60, cooperative=False))
        await eventually(
            lambda: _running(conn, db),
            within=20,
            what="the job to start",
            context=worker.output_tail,
        )
        expires = await conn.fetchval(
            f"SELECT extract(epoch FROM lock_expires_at - now()) FROM {db.schema}.jobs"
        )
        getattr(proxy, fault)()
        cut = time.monotonic()
        code = await worker.wait(within=30)
        took = time.monotonic() - cut
    assert code == 1, worker.output_tail(60)
    assert worker.events("worker-isolated"), worker.output_tail(60)
    assert worker.events("worker-stopped"), worker.output_tail(60)
    # Gone (its job cancelled with it) before the lease it held at the cut ran out.
    assert took < float(expires), (took, expires, worker.output_tail(60))


async def test_sigterm_during_an_outage_exits_promptly(
    db: Database,
    conn: asyncpg.Connection,
    client: JobsClient,
    workers: WorkerSpawner,
) -> None:
    async with faulty_proxy(db.dsn) as proxy:
        worker = workers.start(
            db.worker_env(
                **{
                    **PARTITION_ENV,
                    "TASKQ_MAX_HEARTBEAT_FAILURES": "100",
                    "TASKQ_LOCK_LEASE": "60",
                },
                TASKQ_PG_DSN=proxy.dsn_for(db.dsn),
                **{SIDE_EFFECTS_DSN: db.dsn},
            )
        )
        await client.enqueue(nap, Nap(seconds=60))
        await eventually(
            lambda: _running(conn, db),
            within=20,
            what="the job to start",
            context=worker.output_tail,
        )
        proxy.refuse()
        # Long enough for the listener to be in its reconnect backoff (at once, 1 s, 2 s...).
        await asyncio.sleep(3.0)
        worker.send(signal.SIGTERM)
        sent = time.monotonic()
        code = await worker.wait(within=20)
        took = time.monotonic() - sent
    # Cancellation 1 s + cleanup 1 s, then the writes that cannot land give up.
    assert took < 10, (took, worker.output_tail(60))
    assert code != 2, worker.output_tail(60)
    assert worker.events("worker-stopped"), worker.output_tail(60)
