"""The maintenance-leader lock on an asyncpg connection (see ``postgres.advisory_leader``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ClassVar, Final

import asyncpg

from taskq.adapters.asyncpg import migrate
from taskq.adapters.asyncpg.pool import server_version_num
from taskq.adapters.postgres.advisory_leader import (
    OPERATION_TIMEOUT,
    AdvisoryLeaderLock,
    LeaderQuery,
)
from taskq.adapters.postgres.dedicated import DedicatedConnection
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import numbered_queries
from taskq.domain.errors import StoreUnavailable

if TYPE_CHECKING:
    from taskq.adapters.asyncpg.migrate import Connection
    from taskq.ports.leader_lock import LeaderLock

#: Seconds a graceful close may take before the connection is cut.
CLOSE_TIMEOUT: Final = 5.0
#: asyncpg errors that mean a dedicated connection or its statement failed.
ASYNCPG_ERRORS: Final[tuple[type[Exception], ...]] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    # What a statement sent just as the server's termination message arrives can raise
    # ("cannot switch to state ...; another operation is in progress").
    asyncpg.InternalClientError,
)
#: The same plus OS-level failures (refused, reset, timed out).
CONNECTION_FAILURES: Final[tuple[type[Exception], ...]] = (*ASYNCPG_ERRORS, OSError)


async def close_quietly(conn: Connection) -> None:
    """Close ``conn`` gracefully if it answers in time, else cut it; never raises."""
    if conn.is_closed():
        return
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await conn.close()
    except CONNECTION_FAILURES:
        conn.terminate()


class AsyncpgSession(DedicatedConnection["Connection"]):
    """The dedicated-connection hooks on asyncpg, for the leader lock and the notifier.

    An owned connection is opened from ``_dsn``, which the subclass sets.
    """

    driver_errors: ClassVar[tuple[type[Exception], ...]] = ASYNCPG_ERRORS

    _dsn: str

    async def _open(self) -> Connection:
        conn = await self._replacement(self._from_dsn)
        try:
            await conn.execute(self._setup_sql(server_version_num(conn)))
        except CONNECTION_FAILURES as exc:
            await close_quietly(conn)
            raise StoreUnavailable(f"Postgres is unavailable: {exc}") from exc
        return conn

    async def _from_dsn(self) -> Connection:
        # No statement cache: the session's few statements gain nothing from one, and
        # it would break behind a transaction-mode pooler.
        return await migrate.connect(self._dsn, statement_cache_size=0)

    async def _dispose(self, conn: Connection) -> None:
        await close_quietly(conn)

    def _is_open(self, conn: Connection) -> bool:
        return not conn.is_closed()

    def _server_pid(self, conn: Connection) -> int | None:
        return conn.get_server_pid()


class AsyncpgLeaderLock(AsyncpgSession, AdvisoryLeaderLock["Connection"]):
    """``LeaderLock`` on a session advisory lock held by one asyncpg connection.

    ``connect`` (a ``leader_conn_factory``) makes every replacement session;
    without it they are opened from ``dsn``.

    ``conn`` is a caller-owned dedicated connection (never closed here);
    without it one is opened lazily from ``dsn`` (the direct DSN, never a
    transaction-mode pooler, which would drop the session lock) and owned.
    ``owns_conn=True`` makes a given ``conn`` TaskQ's: closed on ``close()``.
    ``dead_peer_timeout`` sets the server-side keepalives of every session it
    opens (see ``postgres.keepalive``); a caller's ``conn`` is left as it is.
    """

    role = "leader_conn"

    def __init__(
        self,
        dsn: str,
        *,
        schema: Schema,
        conn: Connection | None = None,
        operation_timeout: float = OPERATION_TIMEOUT,
        owns_conn: bool = False,
        connect: Callable[[], Awaitable[Connection]] | None = None,
        dead_peer_timeout: float | None = None,
    ) -> None:
        super().__init__(
            schema=schema,
            conn=conn,
            operation_timeout=operation_timeout,
            owns_conn=owns_conn,
            dead_peer_timeout=dead_peer_timeout,
        )
        self._dsn = dsn
        self._set_source(connect, given=conn is not None and not owns_conn)
        self._queries = numbered_queries("leader", schema)

    async def _query(self, conn: Connection, name: LeaderQuery) -> bool:
        query = self._queries[name]
        return bool(await conn.fetchval(query.sql, *query.args(lock_key=self.lock_key)))


if TYPE_CHECKING:

    def _conforms(schema: Schema) -> LeaderLock:
        return AsyncpgLeaderLock("", schema=schema)


__all__ = [
    "ASYNCPG_ERRORS",
    "CLOSE_TIMEOUT",
    "CONNECTION_FAILURES",
    "AsyncpgLeaderLock",
    "AsyncpgSession",
    "close_quietly",
]
