"""The store's :class:`~taskq.adapters.postgres.driver.Driver` on asyncpg.

Two shapes: :class:`AsyncpgPoolDriver` runs each query on any connection of a
pool (its own implicit transaction), :class:`AsyncpgConnectionDriver` runs on
one connection (a transaction's, or a caller's). Errors are translated here
and nowhere else (see ``postgres.driver`` for the mapping).
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final, TypeAlias

import asyncpg

from taskq.adapters.postgres.driver import (
    Driver,
    Row,
    error_reason,
    sqlstate_error,
    store_queries,
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


@contextmanager
def translated() -> Iterator[None]:
    """Translate asyncpg and socket errors into domain errors and the driver signals."""
    try:
        yield
    except asyncpg.PostgresError as exc:
        constraint = getattr(exc, "constraint_name", None)
        error = sqlstate_error(exc.sqlstate, error_reason(exc), constraint)
        if error is not None:
            raise error from exc
        raise
    except asyncpg.exceptions.DataError:
        raise  # a parameter asyncpg could not encode: already a ValueError
    except (asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        raise StoreUnavailable(f"lost the Postgres connection: {error_reason(exc)}") from exc


class _Statements(ABC):
    """The four statement calls, on whatever :meth:`_target` yields (a connection or the pool).

    asyncpg's pool runs ``fetch``/``fetchrow``/``fetchval``/``execute`` on a
    connection of its own, with the same signatures as a connection.
    """

    _queries: Mapping[str, AsyncpgQuery]

    @abstractmethod
    async def _target(self) -> AnyConnection | Pool:
        """What the statements run on: this driver's connection, or the pool."""

    async def fetch(self, query: str, /, **params: object) -> Sequence[Row]:
        q = self._queries[query]
        target = await self._target()
        with translated():
            rows: Sequence[Row] = await target.fetch(q.sql, *q.bind(params))
        return rows

    async def fetchrow(self, query: str, /, **params: object) -> Row | None:
        q = self._queries[query]
        target = await self._target()
        with translated():
            row: Row | None = await target.fetchrow(q.sql, *q.bind(params))
        return row

    async def fetchval(self, query: str, /, **params: object) -> Any:
        q = self._queries[query]
        target = await self._target()
        with translated():
            return await target.fetchval(q.sql, *q.bind(params))

    async def execute(self, query: str, /, **params: object) -> None:
        q = self._queries[query]
        target = await self._target()
        with translated():
            await target.execute(q.sql, *q.bind(params))


class AsyncpgConnectionDriver(_Statements):
    """Runs store queries on one connection; never closes it."""

    def __init__(self, conn: AnyConnection, queries: Mapping[str, AsyncpgQuery]) -> None:
        self._conn = conn
        self._queries = queries

    async def _target(self) -> AnyConnection:
        return self._conn

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


class AsyncpgPoolDriver(_Statements):
    """Runs each store query on a pooled connection; a transaction holds one connection.

    ``pool`` is awaited on first use, so a store can be made before its pool
    is open (the pool is created lazily from a DSN).
    """

    def __init__(
        self, pool: Callable[[], Awaitable[Pool]], queries: Mapping[str, AsyncpgQuery]
    ) -> None:
        self._pool = pool
        self._queries = queries

    async def _target(self) -> Pool:
        return await self._pool()

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
