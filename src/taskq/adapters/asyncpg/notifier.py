"""Wake-ups over LISTEN/NOTIFY on asyncpg (see ``postgres.wake_listener``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from taskq.adapters.asyncpg.leader_lock import AsyncpgSession
from taskq.adapters.postgres.notify_backoff import DEFAULT_INITIAL, DEFAULT_MAXIMUM
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import numbered_queries
from taskq.adapters.postgres.wake_listener import (
    DEFAULT_HEALTH_CHECK_INTERVAL,
    DEFAULT_MAX_RECONNECT_ATTEMPTS,
    WakeListener,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import asyncpg.pool

    from taskq.adapters.asyncpg.migrate import Connection
    from taskq.ports.notifier import Notifier


class AsyncpgNotifier(AsyncpgSession, WakeListener["Connection"]):
    """``Notifier`` on one asyncpg LISTEN connection plus one publishing connection.

    asyncpg hands notifications to a listener callback, and its termination
    listener flips ``connected`` to False as soon as the session dies, before
    the next health check notices. ``conn`` is a caller-owned dedicated
    connection (LISTENed on, never closed here); without it one is opened
    from ``dsn`` (the direct DSN: a transaction-mode pooler drops LISTEN).
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
        self._queries = numbered_queries("notify", schema)

    async def _subscribe(self, conn: Connection) -> None:
        # Both registrations are sets in asyncpg, so subscribing again is harmless.
        conn.add_termination_listener(self._on_termination)
        await conn.add_listener(self.channel, self._on_notification)

    async def _unsubscribe(self, conn: Connection) -> None:
        conn.remove_termination_listener(self._on_termination)
        await conn.remove_listener(self.channel, self._on_notification)

    async def _ping(self, conn: Connection) -> None:
        await conn.fetchval(self._queries["ping"].sql)

    async def _notify(self, conn: Connection, queue: str) -> None:
        query = self._queries["publish_wake"]
        await conn.execute(query.sql, *query.args(channel=self.channel, queue=queue))

    def _on_notification(
        self,
        conn: Connection | asyncpg.pool.PoolConnectionProxy[Any],
        pid: int,
        channel: str,
        payload: object,
        /,
    ) -> None:
        if channel == self.channel:
            self._deliver(str(payload))

    def _on_termination(self, conn: Connection | asyncpg.pool.PoolConnectionProxy[Any], /) -> None:
        if conn is self._conn:
            self._session_lost(self._conn)


if TYPE_CHECKING:

    def _conforms(schema: Schema) -> Notifier:
        return AsyncpgNotifier("", schema=schema)


__all__ = ["AsyncpgNotifier"]
