"""``connection=``: what the caller's connection may be, and how TaskQ shares it.

Before: concurrent enqueues on one connection released each other's savepoints and
aborted the caller's transaction (psycopg) or failed as a lost connection (asyncpg);
a pool, a sync or the other driver's connection failed deep inside (the asyncpg pool
after running a statement); a psycopg connection in pipeline mode raised a bare
AssertionError; a transaction that had already failed leaked the driver's raw error;
a READ ONLY transaction was reported as a standby server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import psycopg
import pytest
from tests.integration.client.client_actors import Pair, add
from tests.integration.client.pools import CallerPool, caller_pool
from tests.integration.worker.support import Database

from taskq import StoreUnavailable, TransactionAborted

pytestmark = pytest.mark.integration


async def _jobs(db: Database) -> int:
    conn = await asyncpg.connect(db.dsn)
    try:
        return int(await conn.fetchval(f"SELECT count(*) FROM {db.schema}.jobs"))
    finally:
        await conn.close()


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
async def test_concurrent_enqueues_on_one_connection_take_turns(db: Database, keyed: bool) -> None:
    async with caller_pool(db.driver, db.dsn) as pool:
        client = pool.client(db.schema)
        async with pool.transaction() as conn:
            handles = await asyncio.gather(
                *(
                    client.enqueue(
                        add,
                        Pair(a=i, b=i),
                        connection=conn,
                        identity_key=f"k{i}" if keyed else None,
                    )
                    for i in range(5)
                ),
                *(client.enqueue_many(add, [Pair(a=0, b=0)] * 3, connection=conn),),
            )
        assert len({getattr(h, "job_id", None) for h in handles[:5]}) == 5
        assert await _jobs(db) == 8  # committed with the caller's transaction
        await client.aclose()


async def _other_driver_connection(db: Database) -> Any:
    if db.driver == "asyncpg":
        return await psycopg.AsyncConnection.connect(db.dsn)
    return await asyncpg.connect(db.dsn)


async def test_a_wrong_connection_object_is_a_type_error_before_anything_runs(
    db: Database,
) -> None:
    async with caller_pool(db.driver, db.dsn) as pool:
        client = pool.client(db.schema)
        other = await _other_driver_connection(db)
        with psycopg.connect(db.dsn) as sync_conn:
            for wrong, hint in (
                (pool.pool, "pass a connection"),
                (other, "use a"),
                (sync_conn, ""),
                ("postgresql://", ""),
            ):
                with pytest.raises(TypeError, match="connection= takes a") as caught:
                    await client.enqueue(add, Pair(a=1, b=1), connection=wrong)
                assert hint in str(caught.value)
        await other.close()
        assert await _jobs(db) == 0
        await client.aclose()


@asynccontextmanager
async def rolled_back(pool: CallerPool) -> AsyncIterator[Any]:
    """A connection inside a transaction that is rolled back on the way out."""
    if pool.driver == "asyncpg":
        async with pool.pool.acquire() as conn:
            transaction = conn.transaction()
            await transaction.start()
            try:
                yield conn
            finally:
                await transaction.rollback()
    else:
        async with pool.pool.connection() as conn:
            try:
                yield conn
            finally:
                await conn.rollback()


async def test_a_failed_transaction_raises_transaction_aborted(db: Database) -> None:
    async with caller_pool(db.driver, db.dsn) as pool:
        client = pool.client(db.schema)
        async with rolled_back(pool) as conn:
            with pytest.raises(Exception, match="division by zero"):
                await conn.execute("SELECT 1/0")
            with pytest.raises(TransactionAborted, match="roll it back"):
                await client.enqueue(add, Pair(a=1, b=1), connection=conn)
        assert await _jobs(db) == 0
        await client.aclose()


async def test_a_read_only_transaction_is_named_as_such(db: Database) -> None:
    async with caller_pool(db.driver, db.dsn) as pool:
        client = pool.client(db.schema)
        async with rolled_back(pool) as conn:
            await conn.execute("SET TRANSACTION READ ONLY")
            with pytest.raises(StoreUnavailable, match="READ ONLY transaction"):
                await client.enqueue(add, Pair(a=1, b=1), connection=conn)
        await client.aclose()


async def test_a_psycopg_connection_in_pipeline_mode_is_refused_clearly(
    db: Database,
) -> None:
    if db.driver != "psycopg":
        pytest.skip("psycopg only")
    async with caller_pool(db.driver, db.dsn) as pool:
        client = pool.client(db.schema)
        async with pool.pool.connection() as conn:
            async with conn.pipeline():
                with pytest.raises(ValueError, match="pipeline mode"):
                    await client.enqueue(add, Pair(a=1, b=1), connection=conn)
            await client.enqueue(add, Pair(a=1, b=1), connection=conn)  # still usable
        assert await _jobs(db) == 1
        await client.aclose()
