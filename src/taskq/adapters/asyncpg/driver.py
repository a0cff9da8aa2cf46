"""The store's :class:`~taskq.adapters.postgres.driver.Driver` on asyncpg.

Two shapes: :class:`AsyncpgPoolDriver` runs each query on any connection of a
pool (its own implicit transaction), :class:`AsyncpgConnectionDriver` runs on
one connection (a transaction's, or a caller's). Errors are translated here
and nowhere else (see ``postgres.driver`` for the mapping).
"""

from __future__ import annotations

import asyncio
import itertools
from abc import ABC, abstractmethod
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from typing import Any, Final, TypeAlias

import asyncpg
from asyncpg.exceptions import InternalClientError

from taskq.adapters.postgres import driver as pg_driver
from taskq.adapters.postgres.call_budget import CallBudget, active_budget, inner_wait_timeout
from taskq.adapters.postgres.driver import (
    Driver,
    Row,
    error_reason,
    sqlstate_error,
    translating,
)
from taskq.adapters.postgres.lane import Lane
from taskq.adapters.postgres.sql_loader import NumberedQuery
from taskq.domain.errors import StoreClosed, StoreTimeout, StoreUnavailable

#: asyncpg's pool and connection types (generic only to the type checker).
Pool: TypeAlias = "asyncpg.Pool[Any]"
Connection: TypeAlias = "asyncpg.Connection[Any]"
#: A pool-acquired connection is a proxy with the connection's methods.
AnyConnection: TypeAlias = "asyncpg.Connection[Any] | asyncpg.pool.PoolConnectionProxy[Any]"
PoolConnection: TypeAlias = "asyncpg.pool.PoolConnectionProxy[Any]"

_savepoints: Final = itertools.count(1)


def translation(exc: BaseException) -> BaseException | None:
    """The domain error or driver signal for an asyncpg or socket error; None: let it go on."""
    if isinstance(exc, asyncpg.PostgresError):
        constraint = getattr(exc, "constraint_name", None)
        return sqlstate_error(exc.sqlstate, error_reason(exc), constraint)
    if isinstance(exc, asyncpg.exceptions.DataError):
        return None  # a parameter asyncpg could not encode: already a ValueError
    if isinstance(exc, asyncpg.InterfaceError) and str(exc).startswith("pool is clos"):
        # asyncpg has no type for it: the pool was closed (by its owner), not lost.
        return StoreClosed(f"the asyncpg pool TaskQ runs on is closed: {exc}")
    if isinstance(exc, TimeoutError):
        # asyncpg's own timer, not the server: the statement was cancelled client-side.
        return StoreUnavailable(
            "Postgres did not answer within the client-side timeout (the pool's "
            "command_timeout, or the connect timeout); the statement was cancelled"
        )
    if isinstance(exc, asyncpg.InterfaceError | InternalClientError | OSError):
        # InternalClientError: a connection left mid-protocol by a server that went away.
        return StoreUnavailable(f"lost the Postgres connection: {error_reason(exc)}")
    return None


def broken(exc: BaseException) -> bool:
    """True when ``exc`` may leave the connection unusable: it must be closed, not reused.

    A server that terminates a session (administrator command, shutdown, a proxy
    restart) answers mid-statement with a FATAL error and closes the socket, and
    the connection can look alive until asyncpg notices: put back in the pool as
    is, the next statement on it would find the protocol still mid-operation.
    """
    if isinstance(exc, asyncio.CancelledError):
        # Given back as is, asyncpg would first wait for the server to acknowledge a
        # cancel request: forever on a silently dropped (blackholed) connection.
        return True
    if isinstance(exc, asyncpg.PostgresError):
        return exc.sqlstate[:2] in _CONNECTION_SQLSTATE_CLASSES
    if isinstance(exc, asyncpg.exceptions.DataError):
        return False  # refused before anything was sent
    return isinstance(exc, asyncpg.InterfaceError | InternalClientError | OSError | TimeoutError)


async def _acquire(pool: Pool) -> PoolConnection:
    """A connection of ``pool``, waiting at most ``POOL_ACQUIRE_TIMEOUT`` for one to come
    free, or, inside a call's budget, until the budget ends the wait (``PoolWaitTimeout``)."""
    budget = active_budget()
    if budget is not None:
        budget.on_expiry = _pool_wait_error(pool)
        try:
            bounded: PoolConnection = await pool.acquire(
                timeout=inner_wait_timeout(pg_driver.POOL_ACQUIRE_TIMEOUT)
            )
        finally:
            budget.on_expiry = None
        return bounded
    timeout = pg_driver.POOL_ACQUIRE_TIMEOUT  # read per call: tests shorten it
    try:
        conn: PoolConnection = await pool.acquire(timeout=timeout)
    except TimeoutError as exc:
        if pool.get_idle_size() == 0 and pool.get_size() >= pool.get_max_size():
            raise pg_driver.PoolExhausted(pool.get_max_size(), timeout) from exc
        raise  # connecting timed out: translated as a lost connection
    return conn


def _pool_wait_error(pool: Pool) -> Callable[[float], StoreTimeout]:
    """What a call waiting for a connection of ``pool`` raises when its bound runs out."""

    def error(bound: float) -> StoreTimeout:
        size = pool.get_max_size()
        if pool.get_idle_size() == 0 and pool.get_size() >= size:
            return pg_driver.PoolExhausted(size, bound)
        return pg_driver.pool_unreachable(bound, size)

    return error


@asynccontextmanager
async def _acquired(pool: Pool) -> AsyncIterator[PoolConnection]:
    conn = await _acquire(pool)
    try:
        yield conn
    finally:
        await pool.release(conn)


def _terminate_if_broken(conn: AnyConnection, failure: BaseException) -> None:
    if broken(failure):
        conn.terminate()  # the pool replaces it on the next acquire, never hands it out


@contextmanager
def _terminated_if_broken(conn: AnyConnection) -> Iterator[None]:
    """A failure that may have broken ``conn`` closes it before it goes back to its pool."""
    try:
        yield
    except BaseException as exc:
        _terminate_if_broken(conn, exc)
        raise


#: SQLSTATE classes of a connection that is going away: connection exception, operator
#: intervention (admin_shutdown, crash_shutdown, cannot_connect_now).
_CONNECTION_SQLSTATE_CLASSES: Final = ("08", "57")


def translated() -> AbstractContextManager[None]:
    """Translate asyncpg and socket errors into domain errors and the driver signals."""
    return translating(translation)


async def _copy_in(
    conn: AnyConnection, schema: str, table: str, columns: Sequence[str], data: Iterable[bytes]
) -> None:
    async def source() -> AsyncIterator[bytes]:
        for chunk in data:
            yield chunk

    # Text format: no per-column codec runs, so a pool's own jsonb codec cannot interfere.
    await conn.copy_to_table(
        table, source=source(), columns=list(columns), schema_name=schema, format="text"
    )


def caller_connection(conn: object) -> Connection:
    """The asyncpg connection behind ``connection=`` (a pool's proxy unwrapped).

    Anything else is refused before a statement runs: an ``asyncpg.Pool`` has the
    same methods and would run one statement on some connection of its own.
    """
    if isinstance(conn, asyncpg.pool.PoolConnectionProxy):
        # The proxy is new per acquire and cannot be weakly referenced: key on its connection.
        raw: Connection | None = getattr(conn, "_con", None)
        if raw is None:
            raise ValueError("connection= was already released back to its asyncpg pool")
        return raw
    if isinstance(conn, asyncpg.Connection):
        return conn
    if isinstance(conn, asyncpg.Pool):
        hint = ": pass a connection acquired from it (async with pool.acquire() as conn)"
    elif type(conn).__module__.startswith("psycopg"):
        hint = ": this client runs on asyncpg; use a psycopg-backed client for psycopg"
    else:
        hint = ""
    raise TypeError(
        "connection= takes an asyncpg.Connection (or one acquired from an asyncpg.Pool), "
        f"got {type(conn).__module__}.{type(conn).__qualname__}{hint}"
    )


class _Statements(ABC):
    """The four statement calls over :meth:`_call` (a connection's method of that name)."""

    _queries: Mapping[str, NumberedQuery]

    @abstractmethod
    async def _call(self, method: str, sql: str, args: tuple[object, ...]) -> Any:
        """``conn.<method>(sql, *args)`` on this driver's connection or a pooled one."""

    async def fetch(self, query: str, /, **params: object) -> Sequence[Row]:
        q = self._queries[query]
        rows: Sequence[Row] = await self._call("fetch", q.sql, q.positional(params))
        return rows

    async def fetchrow(self, query: str, /, **params: object) -> Row | None:
        q = self._queries[query]
        row: Row | None = await self._call("fetchrow", q.sql, q.positional(params))
        return row

    async def fetchval(self, query: str, /, **params: object) -> Any:
        q = self._queries[query]
        return await self._call("fetchval", q.sql, q.positional(params))

    async def execute(self, query: str, /, **params: object) -> None:
        q = self._queries[query]
        await self._call("execute", q.sql, q.positional(params))


def _client_timeout(config: object) -> float | None:
    """The client-side per-query timeout (``command_timeout``) in asyncpg's settings, if any."""
    timeout = config.get("command_timeout") if isinstance(config, dict) else None
    timeout = getattr(config, "command_timeout", timeout)
    return float(timeout) if isinstance(timeout, int | float) and timeout > 0 else None


class AsyncpgConnectionDriver(_Statements):
    """Runs store queries on one connection; never closes it.

    ``call_timeout`` bounds each call (see ``postgres.call_budget``) without
    touching the connection's own settings.
    """

    def __init__(
        self,
        conn: AnyConnection,
        queries: Mapping[str, NumberedQuery],
        *,
        call_timeout: float | None = None,
    ) -> None:
        self._conn = conn
        self._queries = queries
        self.call_timeout = call_timeout

    @property
    def command_timeout(self) -> float | None:
        """The connection's ``command_timeout``: enqueue lock budgets are kept below half of it."""
        return _client_timeout(getattr(self._conn, "_config", None))

    async def _call(self, method: str, sql: str, args: tuple[object, ...]) -> Any:
        if self.call_timeout is not None:
            async with CallBudget(self.call_timeout):
                with translated():
                    return await getattr(self._conn, method)(sql, *args)
        with translated():
            return await getattr(self._conn, method)(sql, *args)

    async def copy_in(
        self, schema: str, table: str, columns: Sequence[str], data: Iterable[bytes]
    ) -> None:
        async with CallBudget(self.call_timeout):
            with translated():
                await _copy_in(self._conn, schema, table, columns, data)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Driver]:
        """A savepoint inside the connection's transaction (even one begun by hand), else one."""
        async with CallBudget(self.call_timeout), self._transaction() as tx:
            yield tx

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Driver]:
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
    is open (the pool is created lazily from a DSN). Back-to-back statements
    share one kept connection (a :class:`Lane`) instead of a pool round trip
    each; concurrent ones use the pool.
    """

    def __init__(
        self,
        pool: Callable[[], Awaitable[Pool]],
        queries: Mapping[str, NumberedQuery],
        *,
        known: Pool | None = None,
        call_timeout: float | None = None,
    ) -> None:
        self._get_pool = pool
        self._queries = queries
        self._known = known  # the pool, once seen: where command_timeout is read
        #: Each call's bound in seconds (``postgres.call_budget``); None: the worker's
        #: own bounds apply (and ``POOL_ACQUIRE_TIMEOUT`` to a pool wait).
        self.call_timeout = call_timeout
        self._lane: Lane[tuple[Pool, PoolConnection]] = Lane(self._release, discard=self._discard)

    async def _pool(self) -> Pool:
        pool = self._known = await self._get_pool()
        return pool

    @property
    def command_timeout(self) -> float | None:
        """The pool's ``command_timeout``: enqueue lock budgets are kept below half of it."""
        return _client_timeout(getattr(self._known, "_connect_kwargs", None))

    @staticmethod
    async def _release(kept: tuple[Pool, PoolConnection]) -> None:
        # The pool it came from: the store may already have let go of its pool (closing).
        pool, conn = kept
        await pool.release(conn)

    @staticmethod
    async def _discard(kept: tuple[Pool, PoolConnection], failure: BaseException) -> None:
        pool, conn = kept
        _terminate_if_broken(conn, failure)
        await pool.release(conn)

    async def _call(self, method: str, sql: str, args: tuple[object, ...]) -> Any:
        if self.call_timeout is not None:
            async with CallBudget(self.call_timeout):
                return await self._call_on_pool(method, sql, args)
        return await self._call_on_pool(method, sql, args)

    async def _call_on_pool(self, method: str, sql: str, args: tuple[object, ...]) -> Any:
        lane = self._lane
        kept = lane.take()
        if kept is None:
            return await self._on_connection(lambda conn: getattr(conn, method)(sql, *args))
        # Back-to-back statements: _on_connection's kept-connection path, without its lambda.
        return await lane.run(kept, getattr(kept[1], method)(sql, *args), translation)

    async def copy_in(
        self, schema: str, table: str, columns: Sequence[str], data: Iterable[bytes]
    ) -> None:
        async with CallBudget(self.call_timeout):
            await self._on_connection(lambda conn: _copy_in(conn, schema, table, columns, data))

    async def _on_connection(self, op: Callable[[AnyConnection], Awaitable[Any]]) -> Any:
        """``op`` on the kept connection, else (it is in use) on one acquired for it alone."""
        lane = self._lane
        kept = lane.take()
        if kept is None:
            pool = await self._pool()
            if not lane.adopt():
                with translated():
                    async with _acquired(pool) as conn:
                        with _terminated_if_broken(conn):
                            return await op(conn)
            try:
                with translated():
                    kept = (pool, await _acquire(pool))
            except BaseException:
                await lane.drop(None)
                raise
        return await lane.run(kept, op(kept[1]), translation)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Driver]:
        async with CallBudget(self.call_timeout):
            pool = await self._pool()
            with translated():
                async with _acquired(pool) as conn:
                    with _terminated_if_broken(conn):
                        async with conn.transaction():
                            yield AsyncpgConnectionDriver(
                                conn, self._queries, call_timeout=self.call_timeout
                            )


__all__ = [
    "AnyConnection",
    "AsyncpgConnectionDriver",
    "AsyncpgPoolDriver",
    "Connection",
    "Pool",
    "caller_connection",
    "translated",
]
