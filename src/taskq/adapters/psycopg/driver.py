"""The store's :class:`~taskq.adapters.postgres.driver.Driver` on psycopg 3.

:class:`PsycopgPoolDriver` runs each query on a pooled connection (on an
autocommit connection that is one implicit transaction; on one that is not,
the pool commits when the connection goes back). :class:`PsycopgConnectionDriver`
runs on one connection: a transaction's, or a caller's (connections come from
:mod:`.checkout`). Errors are translated here and nowhere else (see
``postgres.driver`` for the mapping).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
from abc import ABC, abstractmethod
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any, Final

import psycopg
from psycopg import AsyncCursor, AsyncRawCursor, sql
from psycopg.pq import TransactionStatus
from psycopg.rows import RowMaker, no_result
from psycopg_pool import PoolClosed

from taskq.adapters.postgres.call_budget import CallBudget
from taskq.adapters.postgres.driver import (
    Driver,
    Row,
    error_reason,
    sqlstate_error,
    translating,
)
from taskq.adapters.postgres.lane import Lane
from taskq.adapters.postgres.sql_loader import NumberedQuery
from taskq.adapters.psycopg.checkout import (
    Connection,
    Pool,
    caller_connection,
    getconn_alive,
    lent,
)
from taskq.domain.errors import ConfigurationError, StoreClosed, StoreUnavailable

_savepoints: Final = itertools.count(1)
#: psycopg's words for a date or timestamp it cannot load into a datetime.
_UNREADABLE_TIME: Final = re.compile(r"too (large|small) \((after year 10K|before year 1)\)")


def translation(exc: BaseException) -> BaseException | None:
    """The domain error or driver signal for a psycopg or socket error; None: let it go on."""
    if isinstance(exc, PoolClosed):
        return StoreClosed(f"the psycopg pool TaskQ runs on is closed: {exc}")
    if isinstance(exc, psycopg.Error):
        state = exc.sqlstate
        reason = error_reason(exc)
        error = sqlstate_error(state, reason, exc.diag.constraint_name)
        if error is not None:
            return error
        if state is None and isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            # No SQLSTATE: the connection or the pool failed, not a statement.
            return StoreUnavailable(f"lost the Postgres connection: {reason}")
        if state is None and isinstance(exc, psycopg.DataError):
            if _UNREADABLE_TIME.search(reason):
                # Refused while loading a row: a stored time Python's datetime cannot hold.
                # Nothing was being stored; asyncpg raises OverflowError for it, so does this.
                return OverflowError(f"a stored time is outside years 1..9999: {reason}")
            # Refused while binding (a NUL in text): the ValueError the server's class 22 maps to.
            return ValueError(f"Postgres cannot store a value: {reason}")
        return None
    if isinstance(exc, OSError):
        return StoreUnavailable(f"lost the Postgres connection: {error_reason(exc)}")
    return None


def translated() -> AbstractContextManager[None]:
    """Translate psycopg and socket errors into domain errors and the driver signals."""
    return translating(translation)


def _dict_rows(cursor: AsyncCursor[Any]) -> RowMaker[dict[str, Any]]:
    """Rows as dicts, keyed by the result's column names read straight off the result
    (``dict_row`` builds a full column description per result first)."""
    result = cursor.pgresult
    if result is None or not result.nfields:
        return no_result
    names = [(result.fname(i) or b"").decode() for i in range(result.nfields)]
    return lambda values: dict(zip(names, values, strict=True))


#: Where a connection keeps its idle statement cursor (see :func:`_rows`).
_CURSOR: Final = "_taskq_raw_cursor"
#: A result with more rows than this is not kept alive in an idle cursor.
_KEEP_CURSOR_MAX_ROWS: Final = 1_000


def _check_encoding(conn: Connection) -> None:
    """Refuse a connection whose client encoding cannot carry every job's text.

    TaskQ's own connections ask for UTF8; a caller's pool may use another (a role's
    or database's default), where a payload or error text with a character outside
    it would fail as if the database could not store it, or, read back, crash a claim.
    """
    encoding = conn.info.encoding
    if encoding != "utf-8":
        raise ConfigurationError(
            f"this psycopg connection uses client_encoding {encoding!r}; TaskQ needs UTF8 "
            "(jobs hold any Unicode text): open the pool with "
            "kwargs={'client_encoding': 'utf8'}"
        )


async def _rows(conn: Connection, sql: str, args: tuple[object, ...]) -> list[dict[str, Any]]:
    _check_encoding(conn)
    # A raw cursor takes the ``$n`` text as it is. A ``%(name)s`` text is parsed on every
    # call once it is longer than psycopg caches (4 kB: the claim statements are).
    # Each connection keeps one cursor between statements: a new cursor (its adapters and
    # transformer) costs about a fifth of a statement's client work. It is taken out while
    # in use, so a statement running meanwhile on the same connection makes its own.
    kept = vars(conn)
    cursor: AsyncRawCursor[dict[str, Any]] | None = kept.pop(_CURSOR, None)
    if cursor is None or cursor.closed:
        cursor = AsyncRawCursor(conn, row_factory=_dict_rows)
    try:
        # Binary results: their values do not depend on the session's DateStyle or
        # IntervalStyle, which psycopg's text loaders need to be ISO and postgres.
        await cursor.execute(sql, args, binary=True)
        result = cursor.pgresult
        rows = await cursor.fetchall() if result is not None and result.nfields else []
    except BaseException:
        await cursor.close()  # its state is the failure's: a fresh one next time
        raise
    if len(rows) > _KEEP_CURSOR_MAX_ROWS:
        await cursor.close()  # do not hold a large result until the next statement
    else:
        kept[_CURSOR] = cursor
    return rows


async def _copy_in(
    conn: Connection, schema: str, table: str, columns: Sequence[str], data: Iterable[bytes]
) -> None:
    _check_encoding(conn)
    statement = sql.SQL("COPY {}.{} ({}) FROM STDIN").format(
        sql.Identifier(schema),
        sql.Identifier(table),
        sql.SQL(", ").join(sql.Identifier(c) for c in columns),
    )
    async with conn.cursor() as cur, cur.copy(statement) as copy:
        for chunk in data:
            await copy.write(chunk)


class _Statements(ABC):
    """The four statement calls over :meth:`_run`, which returns every row as a dict."""

    @abstractmethod
    async def _run(self, query: str, params: Mapping[str, object]) -> list[dict[str, Any]]:
        """Run ``query`` with ``params``; every result row (none for a statement without)."""

    async def fetch(self, query: str, /, **params: object) -> Sequence[Row]:
        return await self._run(query, params)

    async def fetchrow(self, query: str, /, **params: object) -> Row | None:
        rows = await self._run(query, params)
        return rows[0] if rows else None

    async def fetchval(self, query: str, /, **params: object) -> Any:
        rows = await self._run(query, params)
        return next(iter(rows[0].values())) if rows else None

    async def execute(self, query: str, /, **params: object) -> None:
        await self._run(query, params)


async def _to_the_end(op: Coroutine[Any, Any, None]) -> None:
    """Run ``op`` to its end even if the caller is cancelled meanwhile, then let the
    cancel go on: a COPY cut off halfway left the connection (a caller's, for
    ``connection=``) mid-command, "another command is already in progress", its
    transaction lost. A second cancel while waiting is not deferred."""
    task = asyncio.ensure_future(op)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            with contextlib.suppress(Exception):  # the COPY's own failure: the cancel wins
                await task
        raise


class PsycopgConnectionDriver(_Statements):
    """Runs store queries on one connection; never closes it.

    ``call_timeout`` bounds each call (see ``postgres.call_budget``) without
    touching the connection's own settings.
    """

    def __init__(
        self,
        conn: Connection,
        queries: Mapping[str, NumberedQuery],
        *,
        call_timeout: float | None = None,
    ) -> None:
        self._conn = conn
        self._queries = queries
        self.call_timeout = call_timeout

    async def _run(self, query: str, params: Mapping[str, object]) -> list[dict[str, Any]]:
        q = self._queries[query]
        if self.call_timeout is not None:
            async with CallBudget(self.call_timeout):
                with translated():
                    return await _rows(self._conn, q.sql, q.positional(params))
        with translated():
            return await _rows(self._conn, q.sql, q.positional(params))

    async def copy_in(
        self, schema: str, table: str, columns: Sequence[str], data: Iterable[bytes]
    ) -> None:
        async with CallBudget(self.call_timeout):
            with translated():
                await _to_the_end(_copy_in(self._conn, schema, table, columns, data))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Driver]:
        """A savepoint inside the connection's transaction; a transaction when it has none."""
        async with CallBudget(self.call_timeout), self._transaction() as tx:
            yield tx

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Driver]:
        """A savepoint inside the connection's transaction; a transaction when it has none.

        On a connection that is not in autocommit a transaction is always
        open or opened implicitly (psycopg's rule), and it stays the caller's
        to commit: only a savepoint is used then.
        """
        conn = self._conn
        idle = conn.info.transaction_status == TransactionStatus.IDLE
        if conn.autocommit and idle:
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
            if not conn.closed:
                with translated():
                    await conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                    await conn.execute(f"RELEASE SAVEPOINT {name}")
            raise
        with translated():
            await conn.execute(f"RELEASE SAVEPOINT {name}")


class PsycopgPoolDriver(_Statements):
    """Runs each store query on a pooled connection; a transaction holds one connection.

    ``pool`` is awaited on first use, so a store can be made before its pool
    is open (the pool is created lazily from a DSN). Back-to-back statements
    share one kept connection (a :class:`Lane`) instead of a pool round trip
    each; concurrent ones use the pool.
    """

    def __init__(
        self,
        pool: Callable[[], Awaitable[Pool]],
        queries: Mapping[str, NumberedQuery],
        *,
        call_timeout: float | None = None,
    ) -> None:
        self._pool = pool
        self._queries = queries
        self._lane: Lane[tuple[Pool, Connection]] = Lane(self._release)
        #: Each call's bound in seconds (``postgres.call_budget``); None: the worker's
        #: own bounds apply (and ``POOL_ACQUIRE_TIMEOUT`` to a pool wait).
        self.call_timeout = call_timeout

    @staticmethod
    async def _release(kept: tuple[Pool, Connection]) -> None:
        # The pool it came from: the store may already have let go of its pool (closing).
        pool, conn = kept
        await pool.putconn(conn)

    async def _run(self, query: str, params: Mapping[str, object]) -> list[dict[str, Any]]:
        if self.call_timeout is not None:
            async with CallBudget(self.call_timeout):
                return await self._run_on_pool(query, params)
        return await self._run_on_pool(query, params)

    async def _run_on_pool(self, query: str, params: Mapping[str, object]) -> list[dict[str, Any]]:
        q = self._queries[query]
        args = q.positional(params)
        lane = self._lane
        kept = lane.take()
        if kept is None:
            rows: list[dict[str, Any]] = await self._on_connection(
                lambda conn: _rows(conn, q.sql, args)
            )
            return rows
        # Back-to-back statements: _on_connection's kept-connection path, without its lambda
        # (only an autocommit connection is ever kept).
        return await lane.run(kept, _rows(kept[1], q.sql, args), translation)

    async def copy_in(
        self, schema: str, table: str, columns: Sequence[str], data: Iterable[bytes]
    ) -> None:
        async with CallBudget(self.call_timeout):
            await self._on_connection(lambda conn: _copy_in(conn, schema, table, columns, data))

    async def _on_connection(self, op: Callable[[Connection], Awaitable[Any]]) -> Any:
        """``op`` on the kept connection, else (it is in use) on one taken for it alone."""
        lane = self._lane
        kept = lane.take()
        if kept is None:
            pool = await self._pool()
            if not lane.adopt():
                with translated():
                    async with lent(pool) as conn:
                        return await op(conn)
            try:
                with translated():
                    kept = (pool, await getconn_alive(pool))
            except BaseException:
                await lane.drop(None)
                raise
        conn = kept[1]
        try:
            with translated():
                if not conn.autocommit:
                    # The pool's own rule: commit (or roll back) as the connection goes back.
                    async with conn:
                        result = await op(conn)
                    await lane.drop(kept)
                    return result
                result = await op(conn)
        except BaseException:
            await lane.drop(kept)
            raise
        lane.keep(kept)
        return result

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Driver]:
        async with CallBudget(self.call_timeout):
            pool = await self._pool()
            with translated():
                async with lent(pool) as conn, conn.transaction():
                    yield PsycopgConnectionDriver(
                        conn, self._queries, call_timeout=self.call_timeout
                    )


__all__ = [
    "Connection",
    "Pool",
    "PsycopgConnectionDriver",
    "PsycopgPoolDriver",
    "caller_connection",
    "translated",
]
