"""Wake-ups over LISTEN/NOTIFY on psycopg (see ``postgres.wake_listener``).

psycopg delivers notifications through ``conn.notifies()``, which holds the
connection's lock while it waits. A background reader task therefore waits
in slices of :data:`READ_SLICE` seconds: between slices the health check's
``SELECT 1`` gets its turn (asyncio locks are fair). Notifications arriving
while the ping runs are queued by psycopg and yielded by the next slice, so
none is dropped; latency is unaffected because a slice returns as soon as a
notification arrives. When the session dies the reader's wait fails at
once, which flips ``connected`` to False before the next health check.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from psycopg import sql

from taskq.adapters.postgres.notify_backoff import DEFAULT_INITIAL, DEFAULT_MAXIMUM
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import psycopg_queries
from taskq.adapters.postgres.wake_listener import (
    DEFAULT_HEALTH_CHECK_INTERVAL,
    DEFAULT_MAX_RECONNECT_ATTEMPTS,
    WakeListener,
)
from taskq.adapters.psycopg.leader_lock import (
    CONNECTION_FAILURES,
    Connection,
    PsycopgSession,
    close_quietly,
    settle,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from taskq.ports.notifier import Notifier

#: Longest a reader holds the connection before letting a health-check ping in.
READ_SLICE: Final = 0.5


class PsycopgNotifier(PsycopgSession, WakeListener["Connection"]):
    """``Notifier`` on one psycopg LISTEN connection plus one publishing connection.

    ``conn`` is a caller-owned dedicated connection (LISTENed on, never
    closed here; when it is not in autocommit each statement is committed at
    once). Without it an autocommit connection is opened from ``dsn`` (the
    direct DSN: a transaction-mode pooler drops LISTEN).
    ``owns_conn=True`` makes a given ``conn`` TaskQ's: closed on ``close()``.
    ``connect`` (a ``notify_conn_factory``) makes every replacement session.
    """

    role = "notify_conn"

    def __init__(
        self,
        dsn: str,
        *,
        schema: Schema,
        health_check_interval: float = DEFAULT_HEALTH_CHECK_INTERVAL,
        reconnect_backoff_initial: float = DEFAULT_INITIAL,
        reconnect_backoff_max: float = DEFAULT_MAXIMUM,
        conn: Connection | None = None,
        max_reconnect_attempts: int = DEFAULT_MAX_RECONNECT_ATTEMPTS,
        owns_conn: bool = False,
        connect: Callable[[], Awaitable[Connection]] | None = None,
    ) -> None:
        super().__init__(
            schema=schema,
            conn=conn,
            health_check_interval=health_check_interval,
            reconnect_backoff_initial=reconnect_backoff_initial,
            reconnect_backoff_max=reconnect_backoff_max,
            max_reconnect_attempts=max_reconnect_attempts,
            owns_conn=owns_conn,
        )
        self._dsn = dsn
        self._set_source(connect, given=conn is not None and not owns_conn)
        self._queries = psycopg_queries("notify", schema)
        self._listen = sql.SQL("LISTEN {}").format(sql.Identifier(self.channel))
        self._unlisten = sql.SQL("UNLISTEN {}").format(sql.Identifier(self.channel))
        self._reader: tuple[Connection, asyncio.Task[None]] | None = None

    async def _subscribe(self, conn: Connection) -> None:
        await conn.execute(self._listen)
        await settle(conn)
        reader = self._reader
        if reader is not None and reader[0] is conn and not reader[1].done():
            return
        await self._stop_reader()
        task = asyncio.create_task(self._read(conn), name=f"taskq-notify-reader:{self.channel}")
        self._reader = (conn, task)

    async def _unsubscribe(self, conn: Connection) -> None:
        await self._stop_reader()
        await conn.execute(self._unlisten)
        await settle(conn)

    async def _ping(self, conn: Connection) -> None:
        await conn.execute(self._queries["ping"].sql)
        await settle(conn)

    async def _notify(self, conn: Connection, queue: str) -> None:
        query = self._queries["publish_wake"]
        await conn.execute(query.sql, query.args(channel=self.channel, queue=queue))
        await settle(conn)

    async def _dispose(self, conn: Connection) -> None:
        reader = self._reader
        if reader is not None and reader[0] is conn:
            await self._stop_reader()
        await close_quietly(conn)

    async def close(self) -> None:
        await super().close()
        # A reader whose caller-owned connection died unnoticed would otherwise linger.
        await self._stop_reader()

    async def _read(self, conn: Connection) -> None:
        """Hand this session's notifications on until it fails (or the task is cancelled)."""
        try:
            while True:
                async for notify in conn.notifies(timeout=READ_SLICE):
                    if notify.channel == self.channel:
                        self._deliver(notify.payload)
        except CONNECTION_FAILURES:
            self._session_lost(conn)

    async def _stop_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is None:
            return
        task = reader[1]
        task.cancel()
        # wait() rather than await: the reader's own CancelledError must not look like ours.
        await asyncio.wait([task])


if TYPE_CHECKING:

    def _conforms(schema: Schema) -> Notifier:
        return PsycopgNotifier("", schema=schema)


__all__ = ["READ_SLICE", "PsycopgNotifier"]
