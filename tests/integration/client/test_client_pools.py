"""Clients on the caller's pool: the pool stays the caller's, and enqueue joins its transaction."""

from __future__ import annotations

import pytest
from psycopg import AsyncClientCursor
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool
from tests.integration.client.client_actors import Pair, add
from tests.integration.client.pools import CallerPool, caller_pool
from tests.integration.worker.support import Database

from taskq import JobsClient, JobStatus, StoreUnavailable

pytestmark = pytest.mark.integration


class Rollback(Exception):
    """Raised inside a transaction to roll it back."""


async def test_client_on_callers_pool_never_closes_it(db: Database) -> None:
    """A from_asyncpg_pool / from_psycopg_pool client works, and closing it leaves the pool open."""
    async with caller_pool(db.driver, db.dsn) as app:
        async with app.client(db.schema) as client:
            handle = await client.enqueue(add, Pair(a=1, b=2))
            job = await client.get(handle.job_id)
            assert job is not None
            assert job.status is JobStatus.PENDING
        await client.aclose()  # idempotent, and still not the pool's close
        assert app.is_open()
        assert await app.fetch_count(f"SELECT count(*) FROM {db.schema}.jobs") == 1
        with pytest.raises(StoreUnavailable, match="closed"):
            await client.enqueue(add, Pair(a=1, b=2))  # the client's own store is closed


async def test_enqueue_in_callers_transaction_is_visible_only_after_commit(db: Database) -> None:
    """enqueue(connection=conn) writes inside the caller's transaction: invisible until commit."""
    async with caller_pool(db.driver, db.dsn) as app:
        client = app.client(db.schema)
        async with app.transaction() as conn:
            handle = await client.enqueue(add, Pair(a=3, b=4), connection=conn)
            assert await client.get(handle.job_id) is None  # another connection: not yet
        job = await client.get(handle.job_id)
        assert job is not None
        assert job.status is JobStatus.PENDING
        assert job.payload == {"a": 3, "b": 4}


async def enqueue_then_roll_back(app: CallerPool, client: JobsClient, ids: list[int]) -> None:
    """Enqueue one job and a batch on the caller's transaction, then make it roll back."""
    async with app.transaction() as conn:
        handle = await client.enqueue(add, Pair(a=5, b=6), connection=conn)
        many = await client.enqueue_many(add, [Pair(a=i, b=i) for i in range(3)], connection=conn)
        ids.extend([handle.job_id, *(h.job_id for h in many)])
        raise Rollback


async def test_enqueue_in_rolled_back_transaction_leaves_nothing(db: Database) -> None:
    """enqueue(connection=conn) in a transaction that rolls back leaves no job behind."""
    async with caller_pool(db.driver, db.dsn) as app:
        client = app.client(db.schema)
        ids: list[int] = []
        with pytest.raises(Rollback):
            await enqueue_then_roll_back(app, client, ids)
        assert len(ids) == 4
        assert [job_id for job_id in ids if await client.get(job_id) is not None] == []
        assert await app.fetch_count(f"SELECT count(*) FROM {db.schema}.jobs") == 0


@pytest.mark.parametrize("driver", ["psycopg"])
async def test_psycopg_pool_with_its_own_cursor_and_row_factories(db: Database) -> None:
    """A caller's psycopg pool whose connections bind client-side and return tuples: TaskQ
    uses cursors of its own, so enqueue, reads and the caller's transaction all work,
    and the caller's connections keep their factories."""
    pool = AsyncConnectionPool(
        db.dsn,
        min_size=1,
        max_size=2,
        kwargs={"cursor_factory": AsyncClientCursor, "row_factory": tuple_row},
        open=False,
    )
    await pool.open(wait=True)
    try:
        client = JobsClient.from_psycopg_pool(pool, schema=db.schema)
        handle = await client.enqueue(add, Pair(a=1, b=2))
        async with pool.connection() as conn, conn.transaction():
            in_tx = await client.enqueue(add, Pair(a=3, b=4), connection=conn)
            cur = await conn.execute("SELECT 1, 2")
            assert isinstance(cur, AsyncClientCursor)
            assert await cur.fetchone() == (1, 2)
        jobs = [await client.get(h.job_id) for h in (handle, in_tx)]
        assert [(j.status, j.payload) for j in jobs if j is not None] == [
            (JobStatus.PENDING, {"a": 1, "b": 2}),
            (JobStatus.PENDING, {"a": 3, "b": 4}),
        ]
    finally:
        await pool.close()
