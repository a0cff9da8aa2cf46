"""The store's :class:`~taskq.adapters.postgres.driver.Driver` on asyncpg.

Two shapes: :class:`AsyncpgPoolDriver` runs each query on any connection of a
pool (its own implicit transaction), :class:`AsyncpgConnectionDriver` runs on
one connection (a transaction's, or a caller's). Errors are translated here
and nowhere else (see ``postgres.driver`` for the mapping).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final, TypeAlias

import asyncpg

from taskq.adapters.postgres.driver import (
    SQLSTATE_DEADLOCK,
    SQLSTATE_LOCK_NOT_AVAILABLE,
    SQLSTATE_SERIALIZATION,
    SQLSTATE_UNIQUE_VIOLATION,
    Driver,
    LockTimeout,
    Row,
    TransientConflict,
    UniqueConflict,
    store_queries,
    unavailable_sqlstate,
    value_sqlstate,
)
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import AsyncpgQuery
from taskq.domain.errors import StoreUnavailable

#: asyncpg's pool and connection types (generic only to the type checker).
Pool: TypeAlias = "asyncpg.Pool[Any]"
Connection: TypeAlias = "asyncpg.Connection[Any]"
#: A pool-acquired connection is a proxy with the connection's methods.
AnyConnection: TypeAlias = "asyncpg.Connection[Any] | asyncpg.pool.PoolConnectionProxy[Any]"

_savepoints: Final = itertools.count(1)


def render_store_queries(schema: Schema) -> Mapping[str, AsyncpgQuery]:
    """Every store query rendered for asyncpg in ``schema``."""
    return {name: query.for_asyncpg(schema) for name, query in store_queries().items()}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def translated() -> Iterator[None]:
    """Translate asyncpg and socket errors into domain errors and the driver signals."""
    try:
        yield
    except asyncpg.PostgresError as exc:
        state = exc.sqlstate
        reason = _first_line(exc)
        if state == SQLSTATE_LOCK_NOT_AVAILABLE:
            raise LockTimeout(f"lock wait timed out: {reason}") from exc
        if state == SQLSTATE_UNIQUE_VIOLATION:
            constraint = getattr(exc, "constraint_name", None)
            raise UniqueConflict(reason, constraint) from exc
        if state in (SQLSTATE_DEADLOCK, SQLSTATE_SERIALIZATION):
            raise TransientConflict(f"transaction conflict: {reason}") from exc
        if unavailable_sqlstate(state):
            raise StoreUnavailable(f"Postgres is unavailable: {reason}") from exc
        if value_sqlstate(state):
            raise ValueError(f"Postgres cannot store a value: {reason}") from exc
        raise
    except asyncpg.exceptions.DataError:
        raise  # a parameter asyncpg could not encode: already a ValueError
    except (asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        raise StoreUnavailable(f"lost the Postgres connection: {_first_line(exc)}") from exc


class AsyncpgConnectionDriver:
    """Runs store queries on one connection; never closes it."""

    def __init__(self, conn: AnyConnection, queries: Mapping[str, AsyncpgQuery]) -> None:
        self._conn = conn
        self._queries = queries

    async def fetch(self, query: str, /, **params: object) -> Sequence[Row]:
        q = self._queries[query]
        with translated():
            rows: Sequence[Row] = await self._conn.fetch(q.sql, *q.bind(params))
        return rows

    async def fetchrow(self, query: str, /, **params: object) -> Row | None:
        q = self._queries[query]
        with translated():
            row: Row | None = await self._conn.fetchrow(q.sql, *q.bind(params))
        return row

    async def fetchval(self, query: str, /, **params: object) -> Any:
        q = self._queries[query]
        with translated():
            return await self._conn.fetchval(q.sql, *q.bind(params))

    async def execute(self, query: str, /, **params: object) -> None:
        q = self._queries[query]
        with translated():
            await self._conn.execute(q.sql, *q.bind(params))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Driver]:
        """A savepoint inside the connection's transaction (even one begun by hand), else one."""
        conn = self._conn
        if not conn.is_in_transaction():
            with translated():
                async with conn.transaction():
                    yield self
            return
        name = f"taskq_sp_{next(_savepoints)}"
        with translated():
            await conn.execute(f"SAVEPOINT {name}")
        try:
            yield self
        except BaseException:
            if not conn.is_closed():
                with translated():
                    await conn.execute(f"ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}")
            raise
        with translated():
            await conn.execute(f"RELEASE SAVEPOINT {name}")


class AsyncpgPoolDriver:
    """Runs each store query on a pooled connection; a transaction holds one connection.

    ``pool`` is awaited on first use, so a store can be made before its pool
    is open (the pool is created lazily from a DSN).
    """

    def __init__(
        self, pool: Callable[[], Awaitable[Pool]], queries: Mapping[str, AsyncpgQuery]
    ) -> None:
        self._pool = pool
        self._queries = queries

    async def fetch(self, query: str, /, **params: object) -> Sequence[Row]:
        q = self._queries[query]
        pool = await self._pool()
        with translated():
            rows: Sequence[Row] = await pool.fetch(q.sql, *q.bind(params))
        return rows

    async def fetchrow(self, query: str, /, **params: object) -> Row | None:
        q = self._queries[query]
        pool = await self._pool()
        with translated():
            row: Row | None = await pool.fetchrow(q.sql, *q.bind(params))
        return row

    async def fetchval(self, query: str, /, **params: object) -> Any:
        q = self._queries[query]
        pool = await self._pool()
        with translated():
            return await pool.fetchval(q.sql, *q.bind(params))

    async def execute(self, query: str, /, **params: object) -> None:
        q = self._queries[query]
        pool = await self._pool()
        with translated():
            await pool.execute(q.sql, *q.bind(params))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Driver]:
        pool = await self._pool()
        with translated():
            async with pool.acquire() as conn, conn.transaction():
                yield AsyncpgConnectionDriver(conn, self._queries)


__all__ = [
    "AnyConnection",
    "AsyncpgConnectionDriver",
    "AsyncpgPoolDriver",
    "Connection",
    "Pool",
    "render_store_queries",
    "translated",
]
