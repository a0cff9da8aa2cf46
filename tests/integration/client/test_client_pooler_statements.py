"""Prepared statements a transaction-mode pooler broke: a ConfigurationError naming the fix.

Behind PgBouncer a statement prepared on one server session is missing (asyncpg:
"__asyncpg_stmt_4__ does not exist") or already there (psycopg: "_pg3_0 already
exists") on the next; both leaked as raw driver exceptions. Reproduced without
a pooler: the statements are deallocated behind asyncpg's cache, and psycopg's
first statement name is taken before it prepares.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from psycopg_pool import AsyncConnectionPool
from tests.integration.client.client_actors import Pair, add
from tests.integration.worker.support import Database

from taskq import ConfigurationError, JobsClient

pytestmark = pytest.mark.integration


async def test_a_broken_prepared_statement_names_the_settings(db: Database) -> None:
    pool: Any
    if db.driver == "asyncpg":
        pool = await asyncpg.create_pool(db.dsn, min_size=1, max_size=1)
        client = JobsClient.from_asyncpg_pool(pool, schema=db.schema)
        await client.enqueue(add, Pair(a=1, b=2))  # caches its statements
        async with pool.acquire() as conn:
            await conn.execute("DEALLOCATE ALL")  # what a pooler's other session looks like
    else:

        async def configure(conn: Any) -> None:
            await conn.execute("PREPARE _pg3_0 AS SELECT 1", prepare=False)

        pool = AsyncConnectionPool(
            db.dsn,
            min_size=1,
            max_size=1,
            open=False,
            configure=configure,
            kwargs={"prepare_threshold": 0, "autocommit": True},
        )
        await pool.open(wait=True)
        client = JobsClient.from_psycopg_pool(pool, schema=db.schema)
    try:
        with pytest.raises(ConfigurationError, match="TASKQ_PG_IS_POOLED") as info:
            await client.enqueue(add, Pair(a=1, b=2))
        message = str(info.value)
        assert "statement_cache_size=0" in message
        assert "prepare_threshold=None" in message
    finally:
        await client.aclose()
        await pool.close()
