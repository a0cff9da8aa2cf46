"""A leader cut off by a silent partition frees its lock: another worker leads and reclaims.

The leader's lock is a session advisory lock, held for as long as the server
believes the session lives. A session that sits idle sends nothing, so on a
silent partition the server would keep it (and the lock) for the kernel's
keepalive, two hours and more: no other worker could lead, and the cut-off
leader's jobs would never be reclaimed. The leader's session sets its own
keepalives from ``TASKQ_LOCK_LEASE``.

The bound, from the cut (lease 5 s, heartbeat 1 s): the victim's lease ends
within a lease of its last beat (<= 5 s); the server ends its leader session
within ``idle + 3 × interval`` = 2 + 3 × 1 = 5 s of its last packet; the
survivor tries to lead every heartbeat (1 s), reclaims within
``LEASE_CHECK_INTERVAL`` (1 s) of the lease's end and, woken, starts the job.
The two 5 s run side by side: about 7 s. Asserted with room for a loaded
machine: 20 s. Without the keepalives the server keeps the lock for hours.
"""

from __future__ import annotations

import time

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import SIDE_EFFECTS_DSN, Item, block_first
from tests.integration.worker.proxy import can_vanish, faulty_proxy
from tests.integration.worker.support import Database, WorkerSpawner, eventually

from taskq import JobsClient

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not can_vanish(), reason="vanish() needs CAP_NET_ADMIN (TCP_REPAIR)"),
]

LEASE = 5.0
ENV = {
    "TASKQ_LOCK_LEASE": "5",
    "TASKQ_HEARTBEAT_INTERVAL": "1",
    "TASKQ_HEARTBEAT_COMMAND_TIMEOUT": "1",
    # Few connections: the victim's sessions stay on the server until the test ends them.
    "TASKQ_MAX_CONCURRENCY": "2",
}
#: About 7 s expected (see the module docstring); the rest is room for a loaded machine.
BOUND = 20.0


async def _attempt_on(conn: asyncpg.Connection, db: Database, job_id: int, attempt: int) -> int:
    pid: int | None = await conn.fetchval(
        f"SELECT worker_pid FROM {db.schema}.side_effects WHERE job_id = $1 AND attempt = $2",
        job_id,
        attempt,
    )
    return pid or 0


async def test_a_silently_cut_off_leader_frees_its_lock_and_another_worker_reclaims(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    async with faulty_proxy(db.dsn) as proxy:
        try:
            victim = workers.start(
                db.worker_env(
                    **ENV, TASKQ_PG_DSN=proxy.dsn_for(db.dsn), **{SIDE_EFFECTS_DSN: db.dsn}
                )
            )

            async def victim_leads() -> bool:
                return bool(victim.events("leader-elected"))

            await eventually(
                victim_leads, within=30, what="the victim to lead", context=victim.output_tail
            )
            job_id = (await client.enqueue(block_first, Item(n=1))).job_id
            await eventually(
                lambda: _attempt_on(conn, db, job_id, 1),
                within=30,
                what="attempt 1 on the victim",
                context=victim.output_tail,
            )
            survivor = workers.start(db.worker_env(**ENV))

            async def survivor_registered() -> bool:
                return bool(
                    await conn.fetchval(
                        f"SELECT count(*) FROM {db.schema}.workers WHERE pid = $1", survivor.pid
                    )
                )

            await eventually(
                survivor_registered, within=30, what="the survivor", context=survivor.output_tail
            )

            proxy.vanish()
            cut = time.monotonic()
            ran_on = await eventually(
                lambda: _attempt_on(conn, db, job_id, 2),
                within=BOUND + 30,
                what="attempt 2 (the survivor leading and reclaiming)",
                context=lambda: victim.output_tail(20) + "\n" + survivor.output_tail(),
            )
            took = time.monotonic() - cut
        finally:
            # The victim's server sessions outlive it (no FIN ever came): end them.
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE client_port = ANY($1::int[]) AND pid <> pg_backend_pid()",
                proxy.upstream_ports,
            )
    print(f"[{db.driver}] attempt 2 started {took:.1f}s after the cut")
    assert ran_on == survivor.pid
    assert survivor.events("leader-elected"), survivor.output_tail()
    assert took < BOUND, (took, survivor.output_tail())
