"""The maintenance-leader lock on a psycopg connection (see ``postgres.advisory_leader``).

Also home of what every dedicated psycopg connection of TaskQ uses (the
notifier's too): :func:`connect_autocommit`, :func:`close_quietly` and the
:class:`PsycopgSession` hooks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeAlias

import psycopg

from taskq.adapters.postgres.advisory_leader import (
    OPERATION_TIMEOUT,
    AdvisoryLeaderLock,
    LeaderQuery,
)
from taskq.adapters.postgres.dedicated import DedicatedConnection
from taskq.adapters.postgres.driver import connect_reason as _reason
from taskq.adapters.postgres.dsn import dsn_location, scrub_password
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import psycopg_queries
from taskq.domain.errors import ConfigurationError, StoreUnavailable

if TYPE_CHECKING:
    from taskq.ports.leader_lock import LeaderLock

#: psycopg's async connection type (generic only to the type checker).
Connection: TypeAlias = "psycopg.AsyncConnection[Any]"

#: Seconds to wait for a connection before reporting the database unreachable.
CONNECT_TIMEOUT: Final = 10
#: Seconds a graceful close may take.
CLOSE_TIMEOUT: Final = 5.0
#: psycopg errors that mean a dedicated connection or its statement failed.
PSYCOPG_ERRORS: Final[tuple[type[Exception], ...]] = (psycopg.Error,)
#: The same plus OS-level failures (refused, reset, timed out).
CONNECTION_FAILURES: Final[tuple[type[Exception], ...]] = (*PSYCOPG_ERRORS, OSError)


async def connect_autocommit(dsn: str) -> Connection:
    """Open an autocommit connection; failures become domain errors naming host and port only.

    Raises ``StoreUnavailable`` when the server cannot be reached or refuses
    us, ``ConfigurationError`` for a malformed DSN.
    """
    where = dsn_location(dsn)
    try:
        conn: Connection = await psycopg.AsyncConnection.connect(
            dsn,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT,
            client_encoding="utf8",
            # Never prepare: a dedicated session's few statements gain nothing, and
            # prepared statements break behind a transaction-mode pooler.
            prepare_threshold=None,
        )
    except psycopg.ProgrammingError as exc:  # what psycopg raises for a DSN it cannot parse
        raise ConfigurationError(
            f"invalid Postgres DSN for {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    except CONNECTION_FAILURES as exc:
        raise StoreUnavailable(
            f"cannot connect to Postgres at {where}: {scrub_password(_reason(exc), dsn)}"
        ) from exc
    return conn


async def close_quietly(conn: Connection) -> None:
    """Close ``conn`` (bounded); never raises: a failed close leaves nothing to release."""
    if conn.closed:
        return
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await conn.close()
    except CONNECTION_FAILURES:
        pass


async def settle(conn: Connection) -> None:
    """Commit after a statement on a caller-owned connection that is not in autocommit.

    A dedicated session must never sit idle in a transaction: that would hold
    back vacuum, and LISTEN only takes effect (and notifications only arrive)
    outside one.
    """
    if not conn.autocommit:
        await conn.commit()


def is_open(conn: Connection) -> bool:
    """Whether psycopg still considers ``conn`` usable."""
    return not conn.closed and not conn.broken


class PsycopgSession(DedicatedConnection["Connection"]):
    """The dedicated-connection hooks on psycopg, for the leader lock and the notifier.

    An owned autocommit connection is opened from ``_dsn``, which the subclass sets.
    """

    driver_errors: ClassVar[tuple[type[Exception], ...]] = PSYCOPG_ERRORS

    _dsn: str

    async def _open(self) -> Connection:
        conn = await self._replacement(self._from_dsn)
        try:
            await conn.execute(self._setup_sql(conn.info.server_version))
        except CONNECTION_FAILURES as exc:
            await close_quietly(conn)
            raise StoreUnavailable(f"Postgres is unavailable: {exc}") from exc
        return conn

    async def _from_dsn(self) -> Connection:
        return await connect_autocommit(self._dsn)

    async def _dispose(self, conn: Connection) -> None:
        await close_quietly(conn)

    def _is_open(self, conn: Connection) -> bool:
        return is_open(conn)

    def _server_pid(self, conn: Connection) -> int | None:
        return conn.info.backend_pid


class PsycopgLeaderLock(PsycopgSession, AdvisoryLeaderLock["Connection"]):
    """``LeaderLock`` on a session advisory lock held by one psycopg connection.

    ``conn`` is a caller-owned dedicated connection (never closed here; when
    it is not in autocommit each lock statement is committed at once);
    without it an autocommit connection is opened lazily from ``dsn`` (the
    direct DSN, never a transaction-mode pooler) and owned; ``connect`` (a
    ``leader_conn_factory``) makes every replacement session instead.
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
        self._queries = psycopg_queries("leader", schema)

    async def _query(self, conn: Connection, name: LeaderQuery) -> bool:
        query = self._queries[name]
        cursor = await conn.execute(query.sql, query.args(lock_key=self.lock_key))
        row = await cursor.fetchone()
        await settle(conn)
        return row is not None and bool(row[0])


if TYPE_CHECKING:

    def _conforms(schema: Schema) -> LeaderLock:
        return PsycopgLeaderLock("", schema=schema)


__all__ = [
    "CLOSE_TIMEOUT",
    "CONNECTION_FAILURES",
    "CONNECT_TIMEOUT",
    "PSYCOPG_ERRORS",
    "Connection",
    "PsycopgLeaderLock",
    "PsycopgSession",
    "close_quietly",
    "connect_autocommit",
    "is_open",
    "settle",
]
