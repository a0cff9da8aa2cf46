"""What the Postgres store tests share: one spec per driver, and a counting driver.

Each :class:`StoreDriver` knows how to build a store from a DSN or a caller's
pool, open the caller's own pool and connection, and inspect a pool. Tests
run on the schema the contract factories share (emptied before each test).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import psycopg
from psycopg_pool import AsyncConnectionPool

from taskq.adapters.asyncpg.store import AsyncpgQueueStore
from taskq.adapters.postgres.driver import Driver, Row
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store import PostgresQueueStore
from taskq.adapters.psycopg.store import PsycopgQueueStore


@dataclass(frozen=True)
class StoreDriver:
    """One driver, as the tests use it (``Any``: the two drivers' types differ)."""

    name: str
    store: Callable[..., Any]
    caller_pool: Callable[[str], Awaitable[Any]]
    pool_closed: Callable[[Any], bool]
    caller_connection: Callable[[str], AbstractAsyncContextManager[Any]]
    execute: Callable[[Any, str], Awaitable[None]]
    fetchval: Callable[[Any, str], Awaitable[Any]]
    pool_fetchval: Callable[[Any, str], Awaitable[Any]]


async def _asyncpg_pool(dsn: str) -> Any:
    return await asyncpg.create_pool(dsn, min_size=1, max_size=2)


@asynccontextmanager
async def _asyncpg_conn(dsn: str) -> AsyncIterator[Any]:
    conn = await asyncpg.connect(dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def _asyncpg_execute(conn: Any, sql: str) -> None:
    await conn.execute(sql)


async def _asyncpg_fetchval(conn: Any, sql: str) -> Any:
    return await conn.fetchval(sql)


async def _asyncpg_pool_fetchval(pool: Any, sql: str) -> Any:
    async with pool.acquire() as conn:
        return await conn.fetchval(sql)


async def _psycopg_pool(dsn: str) -> Any:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(dsn, min_size=1, max_size=2, open=False)
    await pool.open(wait=True)
    return pool


@asynccontextmanager
async def _psycopg_conn(dsn: str) -> AsyncIterator[Any]:
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        yield conn
    finally:
        await conn.close()


async def _psycopg_execute(conn: Any, sql: str) -> None:
    await conn.execute(sql)


async def _psycopg_fetchval(conn: Any, sql: str) -> Any:
    cur = await conn.execute(sql)
    row = await cur.fetchone()
    return None if row is None else row[0]


async def _psycopg_pool_fetchval(pool: Any, sql: str) -> Any:
    async with pool.connection() as conn:
        return await _psycopg_fetchval(conn, sql)


ASYNCPG = StoreDriver(
    name="asyncpg",
    store=AsyncpgQueueStore,
    caller_pool=_asyncpg_pool,
    pool_closed=lambda pool: bool(pool.is_closing()),
    caller_connection=_asyncpg_conn,
    execute=_asyncpg_execute,
    fetchval=_asyncpg_fetchval,
    pool_fetchval=_asyncpg_pool_fetchval,
)
PSYCOPG = StoreDriver(
    name="psycopg",
    store=PsycopgQueueStore,
    caller_pool=_psycopg_pool,
    pool_closed=lambda pool: bool(pool.closed),
    caller_connection=_psycopg_conn,
    execute=_psycopg_execute,
    fetchval=_psycopg_fetchval,
    pool_fetchval=_psycopg_pool_fetchval,
)
DRIVERS = (ASYNCPG, PSYCOPG)


@dataclass
class CountingDriver:
    """Wraps a :class:`Driver` and records the name of every query it runs."""

    inner: Driver
    calls: list[str] = field(default_factory=list)

    async def fetch(self, query: str, /, **params: object) -> Sequence[Row]:
        self.calls.append(query)
        return await self.inner.fetch(query, **params)

    async def fetchrow(self, query: str, /, **params: object) -> Row | None:
        self.calls.append(query)
        return await self.inner.fetchrow(query, **params)

    async def fetchval(self, query: str, /, **params: object) -> Any:
        self.calls.append(query)
        return await self.inner.fetchval(query, **params)

    async def execute(self, query: str, /, **params: object) -> None:
        self.calls.append(query)
        await self.inner.execute(query, **params)

    async def copy_in(
        self, schema: str, table: str, columns: Sequence[str], data: Iterable[bytes]
    ) -> None:
        self.calls.append(f"<copy {table}>")
        await self.inner.copy_in(schema, table, columns, data)

    def transaction(self) -> AbstractAsyncContextManager[Driver]:
        self.calls.append("<transaction>")
        return self.inner.transaction()


def counted_store(
    store: PostgresQueueStore, schema: Schema
) -> tuple[PostgresQueueStore, CountingDriver]:
    """A store running on ``store``'s driver through a :class:`CountingDriver`."""
    counting = CountingDriver(store._driver)
    return PostgresQueueStore(counting, schema=schema), counting


__all__ = ["ASYNCPG", "DRIVERS", "PSYCOPG", "CountingDriver", "StoreDriver", "counted_store"]
