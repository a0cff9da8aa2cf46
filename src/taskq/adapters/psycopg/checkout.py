"""Where the psycopg driver's connections come from: a pool's, checked alive, or a caller's.

psycopg's pool hands out a connection whose session the server may have ended
while it sat idle (a failover, a restart); :func:`getconn_alive` skips those
without a round trip. A wait for a connection is bounded by the pool acquire
timeout, or by the call's budget, and says which when it runs out.
"""

from __future__ import annotations

import select
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, TypeAlias

import psycopg
from psycopg.pq import ConnStatus, PipelineStatus, TransactionStatus
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from taskq.adapters.postgres import driver as pg_driver
from taskq.adapters.postgres.call_budget import active_budget, inner_wait_timeout
from taskq.domain.errors import StoreTimeout

#: psycopg's pool and connection types (generic only to the type checker).
Pool: TypeAlias = "AsyncConnectionPool[Any]"
Connection: TypeAlias = "psycopg.AsyncConnection[Any]"


#: How many connections the server already closed one checkout skips before it gives up
#: (and lets the statement fail on the next one, as it would have anyway).
DEAD_CONNECTIONS_SKIPPED: Final = 16
#: Reads of an idle connection's pending input: the server's reason, then its end.
_IDLE_READS: Final = 3


def closed_by_server(conn: Connection) -> bool:
    """Whether the server ended this idle connection's session while it sat in the pool.

    A terminated session (a failover, a restart, ``pg_terminate_backend``) leaves
    its reason and then the end of the stream in the socket; psycopg's pool does
    not look, so without this the next statement on it fails. No round trip: an
    idle connection with nothing to read is alive as far as anyone can tell.
    """
    try:
        pgconn = conn.pgconn
        if conn.closed or pgconn.status != ConnStatus.OK:
            return True
        if conn.info.transaction_status != TransactionStatus.IDLE:
            return False  # not idle (a caller's connection): psycopg reads it in turn
        for _ in range(_IDLE_READS):
            if not _readable(pgconn.socket):
                return False
            pgconn.consume_input()
    except (psycopg.Error, OSError):
        return True
    return pgconn.status != ConnStatus.OK


def _readable(fd: int) -> bool:
    """Whether ``fd`` has input now (never waits)."""
    if hasattr(select, "poll"):
        poller = select.poll()  # unlike select(), any descriptor number
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    try:
        readable, _, _ = select.select([fd], [], [], 0)
    except ValueError:  # beyond select()'s FD_SETSIZE: no way to tell, so alive
        return False
    return bool(readable)


async def getconn_alive(pool: Pool) -> Connection:
    """A connection from ``pool`` that the server has not closed meanwhile.

    Closed ones are closed here too and handed back, so the pool replaces them.
    """
    for _ in range(DEAD_CONNECTIONS_SKIPPED):
        conn = await _getconn(pool)
        if not closed_by_server(conn):
            return conn
        await conn.close()
        await pool.putconn(conn)
    return await _getconn(pool)


async def _getconn(pool: Pool) -> Connection:
    """``pool.getconn()`` bounded by ``POOL_ACQUIRE_TIMEOUT`` (or the pool's own, if shorter),
    or, inside a call's budget, until the budget ends the wait (``PoolWaitTimeout``)."""
    budget = active_budget()
    if budget is not None:
        budget.on_expiry = _pool_wait_error(pool)
        try:
            # Past the budget: the pool's own timeout would only say "couldn't get a connection".
            bounded: Connection = await pool.getconn(
                timeout=inner_wait_timeout(pg_driver.POOL_ACQUIRE_TIMEOUT)
            )
        finally:
            budget.on_expiry = None
        return bounded
    timeout = min(pool.timeout, pg_driver.POOL_ACQUIRE_TIMEOUT)  # read per call: tests shorten it
    try:
        conn: Connection = await pool.getconn(timeout=timeout)
    except PoolTimeout as exc:
        if _exhausted(pool):
            raise pg_driver.PoolExhausted(pool.max_size, timeout) from exc
        raise
    return conn


def _exhausted(pool: Pool) -> bool:
    """Every connection of ``pool`` is open and lent out."""
    stats = pool.get_stats()
    full = stats.get("pool_available", 0) == 0 and stats.get("pool_size", 0) >= pool.max_size
    # Connections that fail to open count in pool_size too: that is not exhaustion.
    return full and not stats.get("connections_errors", 0)


def _pool_wait_error(pool: Pool) -> Callable[[float], StoreTimeout]:
    """What a call waiting for a connection of ``pool`` raises when its bound runs out."""

    def error(bound: float) -> StoreTimeout:
        if _exhausted(pool):
            return pg_driver.PoolExhausted(pool.max_size, bound)
        return pg_driver.pool_unreachable(bound, pool.max_size)

    return error


@asynccontextmanager
async def lent(pool: Pool) -> AsyncIterator[Connection]:
    """A live connection of ``pool`` for one use, lent as ``pool.connection()`` lends one
    (committed or rolled back on the way back unless in autocommit), then returned."""
    conn = await getconn_alive(pool)
    try:
        if conn.autocommit:
            yield conn
        else:
            async with conn:
                yield conn
    finally:
        await pool.putconn(conn)


def caller_connection(conn: object) -> Connection:
    """``connection=`` checked: an async psycopg connection not in pipeline mode.

    Anything else is refused before a statement runs (a pool, a sync connection, an
    asyncpg one used to fail deep inside with an AttributeError).
    """
    if isinstance(conn, psycopg.AsyncConnection):
        if conn.pgconn.pipeline_status != PipelineStatus.OFF:
            # Its results come back later, in order: TaskQ reads each statement's at once.
            raise ValueError(
                "connection= is in pipeline mode, which TaskQ does not support: enqueue "
                "outside the `async with conn.pipeline()` block"
            )
        return conn
    if isinstance(conn, AsyncConnectionPool):
        hint = ": pass a connection taken from it (async with pool.connection() as conn)"
    elif isinstance(conn, psycopg.Connection):
        hint = ": TaskQ is async; open a psycopg.AsyncConnection"
    elif type(conn).__module__.startswith("asyncpg"):
        hint = ": this client runs on psycopg; use an asyncpg-backed client for asyncpg"
    else:
        hint = ""
    raise TypeError(
        "connection= takes a psycopg.AsyncConnection, "
        f"got {type(conn).__module__}.{type(conn).__qualname__}{hint}"
    )


__all__ = [
    "DEAD_CONNECTIONS_SKIPPED",
    "Connection",
    "Pool",
    "caller_connection",
    "closed_by_server",
    "getconn_alive",
    "lent",
]
