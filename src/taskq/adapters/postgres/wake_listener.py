"""The Notifier port on LISTEN/NOTIFY, written once for both drivers.

One dedicated connection LISTENs on ``Schema.wake_channel``
(``taskq_wake_<schema>``); each notification's payload (the queue name, ""
for any) goes to every subscribed callback. A driver subclass only opens
connections, subscribes/unsubscribes a connection, pings, and tells this
class when its session died (:meth:`WakeListener._session_lost`); the
reconnect policy, the ownership rules and the fan-out live here:

- When the driver sees the listening session end (the server terminated it,
  the socket closed), a background task makes one reconnect attempt at once,
  without waiting for the next health check: every wake-up published while
  nobody listens is lost. Should it fail (the server is down), the health
  checks go on with the backoff.
- ``health_check()`` pings the listening session with ``SELECT 1`` (a session
  can die without the driver seeing it: a silent network). When the session
  is gone it reconnects and LISTENs again, making at most
  ``max_reconnect_attempts`` attempts per call, and returns False when they
  all fail, so the caller's health loop never blocks for long.
- Reconnect attempts follow :class:`ReconnectBackoff` (the first at once,
  then the initial delay, doubling, capped); ``close()`` cuts a backoff wait
  short. After every reconnect each subscriber gets one wake-up for any queue
  (``""``): wake-ups may have been missed while the session was down.
  Subscriptions survive reconnects: they belong to this object, not to a
  session.
- No ``conn`` given: the listening connection is owned (opened from the DSN,
  closed on loss and on ``close()``). A caller-owned ``conn`` is never
  closed: ``close()`` only stops listening on it; once it is dead, reconnects
  open an owned connection from the DSN instead.
- ``publish`` sends ``pg_notify`` on a separate connection of its own, never
  on the listening one, so a publish never waits behind (or breaks) the
  listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import abstractmethod
from collections.abc import Callable
from typing import Final, TypeVar

from taskq.adapters.postgres.dedicated import DedicatedConnection
from taskq.adapters.postgres.notify_backoff import (
    DEFAULT_INITIAL,
    DEFAULT_MAXIMUM,
    ReconnectBackoff,
)
from taskq.adapters.postgres.schema import Schema
from taskq.domain.errors import StoreUnavailable
from taskq.ports.notifier import WakeCallback

#: ``TASKQ_NOTIFY_HEALTH_CHECK_INTERVAL``'s default, in seconds.
DEFAULT_HEALTH_CHECK_INTERVAL: Final = 5.0
#: Reconnect attempts one ``health_check()`` makes before it reports False.
DEFAULT_MAX_RECONNECT_ATTEMPTS: Final = 5
#: Lower bound on the ping timeout, whatever the health-check interval.
MIN_PING_TIMEOUT: Final = 2.0
#: Seconds a connect + LISTEN or a publish may take before it counts as failed.
OPERATION_TIMEOUT: Final = 10.0

C = TypeVar("C")

log = logging.getLogger("taskq.notify")


class _Subscription:
    """One ``subscribe`` call; compared by identity, so one callback may be subscribed twice."""

    __slots__ = ("callback",)

    def __init__(self, callback: WakeCallback) -> None:
        self.callback = callback


class WakeListener(DedicatedConnection[C]):
    """Wake-ups for one schema over LISTEN/NOTIFY; ``C`` is the driver's connection type.

    A driver supplies :class:`DedicatedConnection`'s hooks (its ``_dispose``
    also stops receiving on the connection) and the LISTEN/NOTIFY ones below.
    """

    def __init__(
        self,
        *,
        schema: Schema,
        conn: C | None,
        health_check_interval: float = DEFAULT_HEALTH_CHECK_INTERVAL,
        reconnect_backoff_initial: float = DEFAULT_INITIAL,
        reconnect_backoff_max: float = DEFAULT_MAXIMUM,
        max_reconnect_attempts: int = DEFAULT_MAX_RECONNECT_ATTEMPTS,
        owns_conn: bool = False,
    ) -> None:
        if not health_check_interval > 0:
            raise ValueError(f"health_check_interval must be > 0, got {health_check_interval}")
        if max_reconnect_attempts < 1:
            raise ValueError(f"max_reconnect_attempts must be >= 1, got {max_reconnect_attempts}")
        self.schema = schema
        self.channel = schema.wake_channel
        self.health_check_interval = health_check_interval
        self.backoff = ReconnectBackoff(reconnect_backoff_initial, reconnect_backoff_max)
        self.max_reconnect_attempts = max_reconnect_attempts
        #: Successful reconnects so far (observable in tests and metrics).
        self.reconnects = 0
        self._conn = conn
        # owns_conn: a given connection TaskQ made (a factory's), so closed like a DSN-opened one.
        self._conn_owned = conn is None or owns_conn
        self._publisher: C | None = None
        self._subscriptions: list[_Subscription] = []
        self._listening = False
        self._started = False
        self._closed = False
        self._closing = asyncio.Event()
        self._session_lock = asyncio.Lock()
        self._publish_lock = asyncio.Lock()
        # Reconnects a session the driver saw end (see _session_lost).
        self._healer: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} channel={self.channel!r} connected={self.connected} "
            f"pid={self.backend_pid} closed={self._closed}>"
        )

    # --- driver hooks ----------------------------------------------------------------

    @abstractmethod
    async def _subscribe(self, conn: C) -> None:
        """LISTEN on ``channel`` and start handing payloads to :meth:`_deliver`; idempotent.

        The driver calls :meth:`_session_lost` when it sees the session die.
        """

    @abstractmethod
    async def _unsubscribe(self, conn: C) -> None:
        """Stop receiving and UNLISTEN (a caller-owned connection at close)."""

    @abstractmethod
    async def _ping(self, conn: C) -> None:
        """Run ``ping`` from ``notify.sql`` on the listening connection."""

    @abstractmethod
    async def _notify(self, conn: C, queue: str) -> None:
        """Run ``publish_wake`` from ``notify.sql`` on the publishing connection."""

    # --- the port --------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether this notifier is listening right now."""
        conn = self._conn
        return (
            self._started
            and not self._closed
            and self._listening
            and conn is not None
            and self._is_open(conn)
        )

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed_now()

    async def start(self) -> None:
        """Connect and LISTEN; raises ``StoreUnavailable`` when that fails. Idempotent."""
        if self._closed:
            raise StoreUnavailable("notifier is closed")
        async with self._session_lock:
            if self._closed_now():
                raise StoreUnavailable("notifier is closed")
            if not self.connected:
                await self._establish()
            self._started = True

    async def publish(self, queue: str = "") -> None:
        """Send one wake-up for ``queue`` on the publishing connection (reopened once if dead)."""
        if self._closed:
            raise StoreUnavailable("notifier is closed")
        async with self._publish_lock:
            conn = self._publisher
            if conn is not None and self._is_open(conn):
                try:
                    await self._send(conn, queue)
                    return
                except StoreUnavailable:
                    pass  # the kept connection went stale: one try on a new one
            conn = await self._open()
            self._publisher = conn
            await self._send(conn, queue)

    def subscribe(self, callback: WakeCallback) -> Callable[[], None]:
        """Register ``callback`` for every wake-up; returns its (idempotent) unsubscribe."""
        subscription = _Subscription(callback)
        self._subscriptions.append(subscription)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscriptions.remove(subscription)

        return unsubscribe

    async def health_check(self) -> bool:
        """Ping the session; when it is gone, reconnect with backoff. True when listening."""
        if self._closed or not self._started:
            return False
        async with self._session_lock:
            if self._closed_now():  # closed while we waited for the lock
                return False
            conn = self._conn
            if conn is not None and self._listening and self._is_open(conn):
                try:
                    async with asyncio.timeout(max(self.health_check_interval, MIN_PING_TIMEOUT)):
                        await self._ping(conn)
                except self._failures as exc:
                    log.warning("notify-listener-lost", extra={"error": str(exc)})
                    self._listening = False
                else:
                    return True
            return await self._reconnect()

    async def close(self) -> None:
        """Stop listening, drop subscriptions, close owned connections; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        self._listening = False
        self._subscriptions.clear()
        async with self._session_lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                if self._conn_owned:
                    await self._dispose(conn)
                elif self._is_open(conn):
                    with contextlib.suppress(*self._failures):
                        async with asyncio.timeout(OPERATION_TIMEOUT):
                            await self._unsubscribe(conn)
        async with self._publish_lock:
            publisher, self._publisher = self._publisher, None
            if publisher is not None:
                await self._dispose(publisher)
        healer = self._healer
        if healer is not None:
            # It gives up once it holds the session lock (closed): wait, do not cancel.
            await asyncio.wait([healer])

    # --- for the driver subclasses ---------------------------------------------------

    def _deliver(self, payload: str) -> None:
        """Hand one wake-up to every current subscriber; one failing callback spoils nothing."""
        if self._closed:
            return
        for subscription in tuple(self._subscriptions):
            if subscription not in self._subscriptions:
                continue  # unsubscribed by an earlier callback of this same wake-up
            try:
                subscription.callback(payload)
            except Exception:
                log.exception("notify-callback-failed", extra={"queue": payload})

    def _session_lost(self, conn: C) -> None:
        """The driver saw ``conn``'s session die: not listening; reconnect at once.

        Called on the event loop (a driver callback or the driver's reader task).
        """
        if conn is self._conn and self._listening:
            self._listening = False
            log.warning("notify-listener-lost", extra={"channel": self.channel})
            self._heal_soon()

    # --- internals -------------------------------------------------------------------

    def _closed_now(self) -> bool:
        # A call, not an attribute test, so the type checker does not carry a narrowing of
        # _closed across an await, where close() may have run meanwhile.
        return self._closed

    def _heal_soon(self) -> None:
        if self._closed or not self._started:
            return
        healer = self._healer
        if healer is not None and not healer.done():
            return
        self._healer = asyncio.get_running_loop().create_task(
            self._heal(), name=f"taskq-notify-reconnect:{self.channel}"
        )

    async def _heal(self) -> None:
        try:
            async with self._session_lock:
                if self._closed_now() or self.connected:
                    return  # closed, or a health check got there first
                await self._reconnect(attempts=1)
        except Exception:
            # Never a silent task failure: the health checks go on trying.
            log.exception("notify-reconnect-failed", extra={"channel": self.channel})

    async def _establish(self) -> None:
        """Get a live connection (reusing the current one if it is open) and LISTEN on it."""
        conn = self._conn
        if conn is not None and not self._is_open(conn):
            await self._forget(conn)
            conn = None
        if conn is None:
            conn = await self._open()
            self._conn, self._conn_owned = conn, True
        try:
            async with asyncio.timeout(OPERATION_TIMEOUT):
                await self._subscribe(conn)
        except self._failures as exc:
            if self._conn_owned:
                await self._forget(conn)
            raise StoreUnavailable(f"cannot LISTEN on {self.channel}: {exc}") from exc
        self._listening = True

    async def _reconnect(self, *, attempts: int | None = None) -> bool:
        """Up to ``attempts`` (default ``max_reconnect_attempts``) tries, on the backoff."""
        self._listening = False
        conn = self._conn
        if conn is not None and (self._conn_owned or not self._is_open(conn)):
            await self._forget(conn)  # an owned session that failed a ping is not trusted again
        for _ in range(attempts or self.max_reconnect_attempts):
            delay = self.backoff.next_delay()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._closing.wait()
            if self._closed_now():
                return False
            try:
                await self._establish()
            except StoreUnavailable as exc:
                log.warning(
                    "notify-reconnect-failed",
                    extra={"attempt": self.backoff.attempts, "delay": delay, "error": str(exc)},
                )
                continue
            if self._closed_now():
                return False  # close() disposes of the new session once we let go of the lock
            self.backoff.reset()
            self.reconnects += 1
            log.info("notify-reconnected", extra={"channel": self.channel})
            self._deliver("")  # wake-ups published while nobody listened are lost
            return True
        return False

    async def _send(self, conn: C, queue: str) -> None:
        try:
            async with asyncio.timeout(OPERATION_TIMEOUT):
                await self._notify(conn, queue)
        except self._failures as exc:
            self._publisher = None
            await self._dispose(conn)
            raise StoreUnavailable(f"cannot publish a wake-up on {self.channel}: {exc}") from exc

    async def _forget(self, conn: C) -> None:
        if conn is self._conn:
            self._conn = None
        if self._conn_owned:
            await self._dispose(conn)


__all__ = [
    "DEFAULT_HEALTH_CHECK_INTERVAL",
    "DEFAULT_MAX_RECONNECT_ATTEMPTS",
    "MIN_PING_TIMEOUT",
    "OPERATION_TIMEOUT",
    "WakeListener",
]
