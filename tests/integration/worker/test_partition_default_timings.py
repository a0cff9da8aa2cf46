"""A silent partition with the DEFAULT heartbeat, lease and watchdog timings.

The partition tests elsewhere shorten the heartbeat to half a second, so the
worker isolates itself long before any other loop could look stale. With the
defaults (a beat every 10 s, given up after 5 s) the producer's claim and the
leader election wait on the dead network for longer than the watchdog's 30 s
stale floor: before the fix the watchdog ended the worker (exit 2,
``stale_loop``) before its third failed beat could isolate it (exit 1).
Takes about a minute, so it runs on one driver: what it pins is the app layer's
ordering of isolation before the watchdog; each driver's partition handling is
pinned on both in test_network_partition.py with fast timings.
"""

from __future__ import annotations

import time

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import SIDE_EFFECTS_DSN, Nap, nap
from tests.integration.worker.proxy import faulty_proxy
from tests.integration.worker.support import Database, WorkerSpawner, eventually

from taskq import JobsClient

pytestmark = pytest.mark.integration

#: The fast timings the worker fixture sets, dropped so the worker runs on its defaults.
DEFAULT_TIMINGS = (
    "TASKQ_HEARTBEAT_INTERVAL",
    "TASKQ_LOCK_LEASE",
    "TASKQ_HEARTBEAT_COMMAND_TIMEOUT",
    "TASKQ_CANCELLATION_GRACE_PERIOD",
    "TASKQ_CLEANUP_GRACE_PERIOD",
    "TASKQ_TERMINATION_GRACE_PERIOD",
)
#: Isolation by the third failed beat (~45 s after the cut: the next would let the
#: leases lapse), then the shutdown; well under the 75 s termination budget on top.
EXIT_WITHIN = 130.0


async def _running(conn: asyncpg.Connection, db: Database) -> bool:
    return bool(await conn.fetchval(f"SELECT count(*) FROM {db.schema}.side_effects"))


@pytest.mark.timeout(200)
@pytest.mark.parametrize("driver", ["asyncpg"])
async def test_a_silent_partition_with_default_timings_ends_in_isolation_not_a_watchdog_trip(
    db: Database,
    conn: asyncpg.Connection,
    client: JobsClient,
    workers: WorkerSpawner,
) -> None:
    async with faulty_proxy(db.dsn) as proxy:
        env = db.worker_env(TASKQ_PG_DSN=proxy.dsn_for(db.dsn), **{SIDE_EFFECTS_DSN: db.dsn})
        for name in DEFAULT_TIMINGS:
            del env[name]
        worker = workers.start(env)
        await client.enqueue(nap, Nap(seconds=300, cooperative=False))
        await eventually(
            lambda: _running(conn, db),
            within=30,
            what="the job to start",
            context=worker.output_tail,
        )
        proxy.blackhole()
        cut = time.monotonic()
        code = await worker.wait(within=EXIT_WITHIN)
        took = time.monotonic() - cut
    tail = worker.output_tail(80)
    assert not worker.events("worker-watchdog-trip"), tail
    assert code == 1, (code, took, tail)
    assert worker.events("worker-isolated"), tail
    assert worker.events("worker-stopped"), tail
    # The reservation extensions that failed on the dead network were retrieved.
    unretrieved = [r for r in worker.error_records() if "never retrieved" in str(r.get("event"))]
    assert unretrieved == [], tail
    print(f"{db.driver}: exit {code} {took:.1f}s after the cut")
