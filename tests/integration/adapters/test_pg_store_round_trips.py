"""Postgres store round trips, plans and the capacity guarantee under real concurrency.

What only the SQL adapters can get wrong: a batch that silently becomes one
statement per job, a claim plan that scans the table, and two claimers that
each see the same free capacity of a capped actor.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from contracts.provision import migrated_schema
from tests.integration.adapters.pg_store_support import StoreDriver, counted_store

from taskq.adapters.postgres.driver import render_store_queries
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store.finish import WRITE_PARAMS
from taskq.domain.actor_config import ActorConfig
from taskq.domain.job import NewJob
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, Finish

pytestmark = pytest.mark.integration

BULK = 20_000
LEASE = timedelta(seconds=60)
#: finish_and_claim's write arrays when it only claims.
NO_WRITES: dict[str, Any] = {name: [] for name in WRITE_PARAMS}


def claim_request(worker: str, limit: int, actors: tuple[str, ...] = ("a",)) -> ClaimRequest:
    return ClaimRequest(
        worker_id=worker, queues=["default"], actors=actors, limit=limit, lease=LEASE
    )


async def test_bulk_enqueue_is_one_statement_with_one_wake_up(
    dsn: str, schema: Schema, store: Any
) -> None:
    """enqueue_many of 20,000 jobs is COPY-written in order, with its ids first, and wakes once."""
    counted, calls = counted_store(store, schema)
    listener = await asyncpg.connect(dsn)
    woken: list[str] = []
    sentinel = asyncio.Event()

    def heard(*args: Any) -> None:
        woken.append(args[3])
        if args[3] == "sentinel":
            sentinel.set()

    try:
        await listener.add_listener(schema.wake_channel, heard)
        jobs = [NewJob(actor="a", payload={"n": n}) for n in range(BULK)]
        results = await counted.enqueue_many(jobs)
        assert calls.calls == ["reserve_job_ids", "<copy jobs>", "wake_queue"]
        ids = [r.job_id for r in results]
        assert len(set(ids)) == BULK
        assert ids == sorted(ids)
        assert not any(r.was_existing for r in results)
        assert await store.count_active() == BULK
        for index in (0, BULK // 2, BULK - 1):
            job = await store.get(ids[index])
            assert dict(job.payload) == {"n": index}
        # Wake-ups arrive in commit order: once the sentinel is in, the batch's is too.
        await listener.execute("SELECT pg_notify($1, 'sentinel')", schema.wake_channel)
        await asyncio.wait_for(sentinel.wait(), 5)
        assert woken == ["default", "sentinel"]
    finally:
        await listener.close()


async def test_claim_and_finish_many_are_one_statement_each(schema: Schema, store: Any) -> None:
    """A strict-FIFO claim and a finish_many of its jobs are one round trip each, and
    finish_and_claim (the worker's round: the last batch's outcomes, the next claim) one."""
    await store.enqueue_many([NewJob(actor="a") for _ in range(100)])
    counted, calls = counted_store(store, schema)
    claimed = await counted.claim(claim_request("w1", 50))
    assert len(claimed) == 50
    lost = await counted.finish_many(
        [Finish(lease=c.lease, status=JobStatus.SUCCEEDED) for c in claimed[:25]]
    )
    assert lost == []
    lost, again = await counted.finish_and_claim(
        [Finish(lease=c.lease, status=JobStatus.SUCCEEDED) for c in claimed[25:]],
        claim_request("w1", 50),
    )
    assert (lost, len(again)) == ([], 50)
    assert calls.calls == ["finish_and_claim"] * 3


async def test_claim_on_two_queues_uses_the_multi_queue_statement(
    schema: Schema, store: Any
) -> None:
    """A strict-FIFO claim over two queues is one claim_fifo round trip taking from both."""
    await store.enqueue_many([NewJob(actor="a", queue=q) for q in ("default", "other")])
    counted, calls = counted_store(store, schema)
    request = ClaimRequest(
        worker_id="w1", queues=["default", "other"], actors=("a",), limit=5, lease=LEASE
    )
    claimed = await counted.claim(request)
    assert sorted(c.queue for c in claimed) == ["default", "other"]
    assert calls.calls == ["claim_fifo"]


async def test_single_enqueue_is_one_statement_with_one_wake_up(
    dsn: str, schema: Schema, store: Any
) -> None:
    """enqueue of one job without keys runs the one-row insert_job and wakes its queue once."""
    counted, calls = counted_store(store, schema)
    listener = await asyncpg.connect(dsn)
    woken: list[str] = []
    sentinel = asyncio.Event()

    def heard(*args: Any) -> None:
        woken.append(args[3])
        if args[3] == "sentinel":
            sentinel.set()

    try:
        await listener.add_listener(schema.wake_channel, heard)
        result = await counted.enqueue(NewJob(actor="a", queue="q1", tags=("t",)))
        assert calls.calls == ["insert_job"]
        assert not result.was_existing
        job = await store.get(result.job_id)
        assert job.status == JobStatus.PENDING
        assert tuple(job.tags) == ("t",)
        await listener.execute("SELECT pg_notify($1, 'sentinel')", schema.wake_channel)
        await asyncio.wait_for(sentinel.wait(), 5)
        assert woken == ["q1", "sentinel"]
    finally:
        await listener.close()


#: The columns a fresh job's two insert statements must agree on (not id, not the clock).
_INSERTED_COLUMNS = (
    "queue, actor, payload, status::text, priority, attempt, max_attempts, fencing_token,"
    " scheduled_at = created_at AS due_at_creation, started_at, finished_at, locked_by,"
    " cancel_phase, schedule_to_close, fairness_key, identity_key, idempotency_key, metadata,"
    " tags, result, last_error, trace_id, span_id, attempt_timeout"
)


async def test_a_job_setting_no_optional_column_takes_the_bare_insert(
    dsn: str, schema: Schema, store: Any
) -> None:
    """A single job that sets no optional column runs insert_job_bare (six parameters,
    defaults for the rest) and writes exactly the row insert_job writes for it; one
    optional column set, or a clock given, takes insert_job."""
    counted, calls = counted_store(store, schema)
    bare = NewJob(actor="a", queue="q1", payload={"n": 1}, priority=3, max_attempts=7)
    first = await counted.enqueue(bare)
    assert calls.calls == ["insert_job_bare"]
    calls.calls.clear()
    await counted.enqueue(bare, now=datetime.now(UTC))
    await counted.enqueue(NewJob(actor="a", queue="q1", payload={"n": 1}, trace_id="t"))
    await counted.enqueue(NewJob(actor="a", attempt_timeout=timedelta(seconds=1)))
    assert calls.calls == ["insert_job", "insert_job", "insert_job"]
    conn = await asyncpg.connect(dsn)
    try:
        full_sql = render_store_queries(schema)["insert_job"]
        second = await conn.fetchval(
            full_sql.sql,
            *full_sql.positional(
                {
                    "now": None,
                    "queue": "q1",
                    "actor": "a",
                    "payload": '{"n": 1}',
                    "priority": 3,
                    "max_attempts": 7,
                    "scheduled_at": None,
                    "schedule_to_close": None,
                    "fairness_key": None,
                    "metadata": "{}",
                    "tags": [],
                    "trace_id": None,
                    "span_id": None,
                    "attempt_timeout": None,
                    "channel": schema.wake_channel,
                }
            ),
        )
        rows = await conn.fetch(
            f"SELECT {_INSERTED_COLUMNS} FROM {schema.quoted}.jobs WHERE id = ANY($1::bigint[])"
            " ORDER BY id",
            [first.job_id, second],
        )
    finally:
        await conn.close()
    assert len(rows) == 2
    assert dict(rows[0]) == dict(rows[1])
    assert rows[0]["status"] == "pending"
    assert rows[0]["due_at_creation"]


async def test_concurrent_claims_never_exceed_max_concurrent(
    driver: StoreDriver, dsn: str, schema: Schema, store: Any
) -> None:
    """Twenty claims racing on separate pools take at most max_concurrent jobs of a capped actor."""
    await store.sync_actor_configs([ActorConfig(actor="a", queue="default", max_concurrent=3)])
    await store.enqueue_many([NewJob(actor="a") for _ in range(60)])
    others = [driver.store(dsn, schema=schema, max_size=1) for _ in range(4)]
    try:
        for round_no in range(3):
            claims = await asyncio.gather(
                *(others[i % len(others)].claim(claim_request(f"w{i}", 5)) for i in range(20))
            )
            taken = [job for batch in claims for job in batch]
            assert len(taken) <= 3, f"round {round_no}: {len(taken)} running, cap 3"
            lost = await store.finish_many(
                [Finish(lease=j.lease, status=JobStatus.SUCCEEDED) for j in taken]
            )
            assert lost == []
    finally:
        for other in others:
            await other.close()


@pytest.mark.parametrize(
    ("name", "queue_params"),
    [
        ("claim_fifo", {"queues": ["default"]}),
        ("finish_and_claim", {"queue": "default", **NO_WRITES}),
    ],
)
async def test_strict_fifo_claim_reads_the_dispatch_index_despite_stale_statistics(
    dsn: str, name: str, queue_params: dict[str, Any]
) -> None:
    """With statistics from other data, the claim is still an ordered scan of jobs_dispatch_idx."""
    async with migrated_schema(dsn=dsn, prefix="taskq_plan") as provisioned:
        schema = Schema(provisioned.schema)
        query = render_store_queries(schema)[name]
        conn = await asyncpg.connect(dsn)
        try:
            jobs = f"{schema.quoted}.jobs"
            # Statistics that know only actor "x" on queue "other"...
            await conn.execute(
                f"INSERT INTO {jobs} (queue, actor, status) "
                "SELECT 'other', 'x', 'pending' FROM generate_series(1, 2000)"
            )
            await conn.execute(f"ANALYZE {jobs}")
            # ...while the claim wants many jobs of actor "a" on queue "default".
            await conn.execute(
                f"""INSERT INTO {jobs} (queue, actor, status, finished_at)
                    SELECT 'default', 'a',
                           CASE WHEN g % 2 = 0 THEN 'pending' ELSE 'succeeded' END,
                           CASE WHEN g % 2 = 1 THEN now() END
                    FROM generate_series(1, {BULK}) AS g"""
            )
            args = query.args(
                now=None,
                actors=["a"],
                limit=10,
                start_now=0,
                worker_id="w",
                lease=LEASE,
                **queue_params,
            )
            async with conn.transaction():
                rows = await conn.fetch("EXPLAIN (COSTS OFF) " + query.sql, *args)
            plan = "\n".join(row[0] for row in rows)
            assert "Index Scan using jobs_dispatch_idx" in plan, plan
            assert "Seq Scan on jobs" not in plan, plan
            assert "jobs_waiting_actor_idx" not in plan, plan
        finally:
            await conn.close()
