"""NOTIFY wakes an idle worker: jobs start in milliseconds although the polls are minutes apart."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Awaitable, Callable

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, record
from tests.integration.worker.support import (
    SLOW_POLLS,
    Database,
    WorkerSpawner,
    eventually,
    wait_until_listening,
)

from taskq import JobsClient
from taskq.adapters.postgres.schema import Schema
from taskq.app.settings import TaskQSettings

pytestmark = pytest.mark.integration

JOBS = 20
#: Polls this slow never fire during the test: only a NOTIFY can start a job in time.
SLOW_POLL = "120"


async def test_notify_starts_jobs_on_an_idle_worker_without_polling(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """With 120 s polls, jobs enqueued one by one start within well under a second (NOTIFY)."""
    worker = workers.start(
        # No health ping either, so the listener session's last statement stays its LISTEN.
        db.worker_env(**SLOW_POLLS, TASKQ_NOTIFY_HEALTH_CHECK_INTERVAL=SLOW_POLL)
    )
    await wait_until_listening(conn, db.schema, context=worker.output_tail)

    for n in range(JOBS):
        handle = await client.enqueue(record, Item(n=n))

        async def done(job_id: int = handle.job_id) -> bool:
            status: str | None = await conn.fetchval(
                f"SELECT status FROM {db.schema}.jobs WHERE id = $1", job_id
            )
            return status == "succeeded"

        # 10 s is far below the 120 s poll: a pass here already means NOTIFY worked.
        await eventually(done, within=10, what=f"job {n} to succeed", context=worker.output_tail)
        await asyncio.sleep(0.05)  # let the worker go idle again before the next enqueue

    rows = await conn.fetch(
        f"SELECT extract(epoch FROM started_at - created_at) AS latency "
        f"FROM {db.schema}.jobs ORDER BY id"
    )
    latencies = sorted(float(row["latency"]) for row in rows)
    assert len(latencies) == JOBS
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    print(
        f"[{db.driver}] enqueue->start over {JOBS} jobs: p50 {p50 * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms"
    )
    assert p50 < 1.0


BURSTS = 4
CALLERS = 16
PER_CALLER = 5


async def test_concurrent_enqueues_share_wake_ups_and_leave_no_job_asleep(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """Bursts of concurrent single enqueues share wake-ups (one in flight per queue), and
    every job still starts within seconds although the polls are minutes apart: a job
    written while a wake-up was in flight gets one sent after its commit."""
    worker = workers.start(
        db.worker_env(**SLOW_POLLS, TASKQ_NOTIFY_HEALTH_CHECK_INTERVAL=SLOW_POLL)
    )
    received: list[str] = []
    listener = await asyncpg.connect(db.dsn)
    await listener.add_listener(
        Schema(db.schema).wake_channel, lambda *args: received.append(args[-1])
    )
    try:
        await wait_until_listening(
            conn, db.schema, context=worker.output_tail, besides_pid=listener.get_server_pid()
        )
        enqueued = 0
        for burst in range(BURSTS):

            async def caller(k: int, burst: int = burst) -> None:
                for i in range(PER_CALLER):
                    await client.enqueue(record, Item(n=(burst * CALLERS + k) * PER_CALLER + i))

            await asyncio.gather(*(caller(k) for k in range(CALLERS)))
            enqueued += CALLERS * PER_CALLER

            async def all_done(expected: int = enqueued) -> bool:
                done: int = await conn.fetchval(
                    f"SELECT count(*) FROM {db.schema}.jobs WHERE status = 'succeeded'"
                )
                return done == expected

            # 10 s is far below the 120 s poll: only wake-ups can start these jobs in time.
            await eventually(
                all_done, within=10, what=f"burst {burst} to succeed", context=worker.output_tail
            )
            await asyncio.sleep(0.05)  # idle again before the next burst
    finally:
        await listener.close()
    print(f"[{db.driver}] {enqueued} concurrent enqueues sent {len(received)} wake-ups")
    assert 0 < len(received) < enqueued


async def test_a_job_committed_after_the_wake_up_in_flight_gets_its_own(
    db: Database, conn: asyncpg.Connection, workers: WorkerSpawner
) -> None:
    """The second of two concurrent enqueues is spared the wake-up (the first carries one)
    but commits long after it, once the worker has run the first job and gone idle: the
    wake-up it is owed, sent after its commit, is what starts it (polls are minutes apart)."""
    worker = workers.start(
        db.worker_env(**SLOW_POLLS, TASKQ_NOTIFY_HEALTH_CHECK_INTERVAL=SLOW_POLL)
    )
    await wait_until_listening(conn, db.schema, context=worker.output_tail)
    # The held insert may wait for its key as long as the test needs.
    settings = TaskQSettings.load_from_dict(
        {
            "pg_dsn": db.dsn,
            "schema_name": db.schema,
            "driver": db.driver,
            "unique_lock_timeout_ms": 30_000,
        }
    )
    async with JobsClient.connect(settings=settings) as client:
        await _held_job_starts(db, conn, client, worker.output_tail)


async def _held_job_starts(
    db: Database, conn: asyncpg.Connection, client: JobsClient, context: Callable[[], str]
) -> None:
    await client.enqueue(record, Item(n=0))  # warms the worker's statements up

    async def succeeded() -> int:
        return int(
            await conn.fetchval(f"SELECT count(*) FROM {db.schema}.jobs WHERE status = 'succeeded'")
        )

    await eventually(lambda: _equals(succeeded, 1), within=10, what="the warm-up job")
    # An uncommitted rival with the same identity key holds the second insert back.
    rival = conn.transaction()
    await rival.start()
    await conn.execute(
        f"INSERT INTO {db.schema}.jobs (queue, actor, payload, status, identity_key)"
        " VALUES ('default', $1, '{}', 'pending', 'held')",
        record.name,
    )
    first = asyncio.ensure_future(client.enqueue(record, Item(n=1)))
    second = asyncio.ensure_future(client.enqueue(record, Item(n=2), identity_key="held"))
    await first
    await eventually(lambda: _equals(succeeded, 2), within=10, what="the first job")
    await asyncio.sleep(0.05)  # the worker has gone idle: only a wake-up starts the next job
    assert not second.done()
    await rival.rollback()
    await second
    await eventually(lambda: _equals(succeeded, 3), within=10, what="the held job", context=context)


async def _equals(count: Callable[[], Awaitable[int]], expected: int) -> bool:
    return await count() == expected
