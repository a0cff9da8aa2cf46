"""The application's own pool, for each driver: what ``from_*_pool`` clients are given."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
from psycopg_pool import AsyncConnectionPool

from taskq import JobsClient


@dataclass(frozen=True, slots=True)
class CallerPool:
    """A caller-owned pool and the driver-specific ways to use it."""

    driver: str
    pool: Any

    def client(self, schema: str, **options: Any) -> JobsClient:
        if self.driver == "asyncpg":
            return JobsClient.from_asyncpg_pool(self.pool, schema=schema, **options)
        return JobsClient.from_psycopg_pool(self.pool, schema=schema, **options)

    def is_open(self) -> bool:
        if self.driver == "asyncpg":
            return not self.pool.is_closing()
        return not self.pool.closed

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        """A connection inside an open transaction: committed on exit, rolled back on error."""
        if self.driver == "asyncpg":
            async with self.pool.acquire() as conn, conn.transaction():
                yield conn
        else:
            async with self.pool.connection() as conn, conn.transaction():
                yield conn

    async def fetch_count(self, sql: str) -> int:
        """Run a ``SELECT count(*) ...`` on the pool (proves the pool still works)."""
        if self.driver == "asyncpg":
            return int(await self.pool.fetchval(sql))
        async with self.pool.connection() as conn:
            cur = await conn.execute(sql)
            row = await cur.fetchone()
            assert row is not None
            return int(row[0])


@asynccontextmanager
async def caller_pool(driver: str, dsn: str) -> AsyncIterator[CallerPool]:
    """A small pool opened and closed by the caller (the test), never by TaskQ."""
    if driver == "asyncpg":
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=3)
        try:
            yield CallerPool(driver, pool)
        finally:
            await pool.close()
    else:
        psycopg_pool = AsyncConnectionPool(dsn, min_size=1, max_size=3, open=False)
        await psycopg_pool.open(wait=True)
        try:
            yield CallerPool(driver, psycopg_pool)
        finally:
            await psycopg_pool.close()
