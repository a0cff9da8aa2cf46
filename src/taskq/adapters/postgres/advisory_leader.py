"""The maintenance-leader lock as a session advisory lock, written once for both drivers.

The lock lives exactly as long as the session of one dedicated connection
(``pg_try_advisory_lock(hashtextextended('taskq:maintenance_leader:<schema>', 0))``,
queries in ``queries/leader.sql``). A driver subclass only opens, queries and
closes that connection; the ownership rules and the loss handling are here:

- No ``conn`` given: the connection is opened lazily from the DSN and owned;
  losing or closing it ends the session, which releases the lock.
- A caller-owned ``conn``: used, never closed. ``close()`` unlocks on it
  instead. Once it is found dead, the lock opens its own connection from the
  DSN for the next ``try_acquire`` (a dead session holds nothing).
- Any failure of the dedicated connection means the lock is lost: ``held``
  turns False and an owned connection is closed, so a half-broken session can
  never keep the lock while this process believes it is not the leader.

Every query runs under one mutex (one connection runs one query at a time)
and a timeout, so a silent network partition counts as a loss instead of a
hang. That bounds this side only: the server keeps a cut-off session, and the
lock with it, until TCP tells it the peer is gone, which for an idle session
takes the kernel's keepalive (two hours and more). So a session this lock
opens sets its own keepalives (``dead_peer_timeout``, the worker's lease; see
``postgres.keepalive``): a leader cut off silently frees the lock for another
worker within about that long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import abstractmethod
from typing import Final, Literal, TypeVar

from taskq.adapters.postgres.dedicated import DedicatedConnection, session_setup
from taskq.adapters.postgres.keepalive import keepalive_setup
from taskq.adapters.postgres.schema import Schema
from taskq.domain.errors import StoreUnavailable

#: The purpose part of the lock key: ``taskq:maintenance_leader:<schema>``.
LEADER_LOCK_PURPOSE: Final = "maintenance_leader"
#: Seconds one lock query may take before the session counts as lost.
OPERATION_TIMEOUT: Final = 10.0

LeaderQuery = Literal["try_acquire_leader", "probe_leader", "release_leader"]
C = TypeVar("C")

log = logging.getLogger("taskq.leader")


class _SessionFailed(Exception):
    """The dedicated connection failed; ``__cause__`` is the driver error."""


class AdvisoryLeaderLock(DedicatedConnection[C]):
    """The ``LeaderLock`` port on a session advisory lock; ``C`` is the driver's connection.

    A driver supplies :class:`DedicatedConnection`'s hooks and :meth:`_query`.
    """

    def __init__(
        self,
        *,
        schema: Schema,
        conn: C | None,
        operation_timeout: float = OPERATION_TIMEOUT,
        owns_conn: bool = False,
        dead_peer_timeout: float | None = None,
    ) -> None:
        self.schema = schema
        # None: the server's own keepalive settings (the kernel's, unless configured).
        self._dead_peer_timeout = dead_peer_timeout
        self.lock_key = schema.lock_key(LEADER_LOCK_PURPOSE)
        self._conn = conn
        # owns_conn: a given connection TaskQ made (a factory's), so closed like a DSN-opened one.
        self._conn_owned = conn is None or owns_conn
        self._timeout = operation_timeout
        self._held = False
        self._closed = False
        self._mutex = asyncio.Lock()

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} key={self.lock_key!r} held={self._held} "
            f"pid={self.backend_pid} closed={self._closed}>"
        )

    # --- driver hooks ----------------------------------------------------------------

    @abstractmethod
    async def _query(self, conn: C, name: LeaderQuery) -> bool:
        """Run ``name`` from ``leader.sql`` with ``lock_key`` and return its one boolean."""

    def _setup_sql(self, server_version_num: int) -> str:
        setup = [session_setup(server_version_num)]
        if self._dead_peer_timeout is not None:
            setup += keepalive_setup(self._dead_peer_timeout, server_version_num)
        return "; ".join(setup)

    # --- the port --------------------------------------------------------------------

    @property
    def held(self) -> bool:
        return self._held

    async def try_acquire(self) -> bool:
        """True when this instance holds the lock now; never waits for another holder.

        Raises ``StoreUnavailable`` when no working connection can be had (the
        lock is then not held). A connection found dead is replaced once
        within the same call.
        """
        async with self._mutex:
            if self._closed:
                raise StoreUnavailable("leader lock is closed")
            conn, fresh = await self._connection()
            try:
                return await self._acquire_on(conn)
            except StoreUnavailable:
                if fresh:
                    raise
            # The kept connection had died unnoticed (say, a server restart): one more try.
            conn, _ = await self._connection()
            return await self._acquire_on(conn)

    async def probe(self) -> bool:
        """Whether this session still holds the lock (False, and ``held`` False, once lost)."""
        async with self._mutex:
            conn = self._conn
            if not self._held or conn is None:
                self._held = False
                return False
            try:
                still = await self._run(conn, "probe_leader")
            except _SessionFailed as failed:
                await self._lose(conn, failed)
                return False
            if not still:
                log.warning("leader-lock-lost", extra={"lock_key": self.lock_key})
            self._held = still
            return still

    async def release(self) -> None:
        """Give the lock up; idempotent. The connection stays open for the next election."""
        async with self._mutex:
            self._held = False
            conn = self._conn
            if conn is None or not self._is_open(conn):
                return
            try:
                await self._run(conn, "release_leader")
            except _SessionFailed as failed:
                await self._lose(conn, failed)

    async def close(self) -> None:
        """Release and free the owned connection; a caller-owned one is unlocked, not closed."""
        if self._closed:
            return
        async with self._mutex:
            self._closed = True
            self._held = False
            conn, self._conn = self._conn, None
            if conn is None:
                return
            if self._conn_owned:
                await self._dispose(conn)  # ending the session releases the lock
            elif self._is_open(conn):
                # A failed caller-owned session is the caller's to close.
                with contextlib.suppress(_SessionFailed):
                    await self._run(conn, "release_leader")

    # --- internals -------------------------------------------------------------------

    async def _connection(self) -> tuple[C, bool]:
        """The dedicated connection, opening an owned one when there is none; (conn, fresh)."""
        conn = self._conn
        if conn is not None and self._is_open(conn):
            return conn, False
        if conn is not None:
            await self._forget(conn)
        try:
            # Bounded like a query: a server that accepts and never answers (a silent
            # partition) would hold the connect for the driver's own timeout (asyncpg: 60 s).
            async with asyncio.timeout(self._timeout):
                conn = await self._open()
        except TimeoutError as exc:
            raise StoreUnavailable(
                f"leader lock connection not opened within {self._timeout:g}s"
            ) from exc
        self._conn, self._conn_owned = conn, True
        return conn, True

    async def _acquire_on(self, conn: C) -> bool:
        try:
            self._held = await self._run(conn, "try_acquire_leader")
        except _SessionFailed as failed:
            await self._lose(conn, failed)
            raise StoreUnavailable(
                f"leader lock connection failed: {failed.__cause__}"
            ) from failed.__cause__
        return self._held

    async def _run(self, conn: C, name: LeaderQuery) -> bool:
        try:
            async with asyncio.timeout(self._timeout):
                return await self._query(conn, name)
        except self._failures as exc:
            raise _SessionFailed(name) from exc

    async def _lose(self, conn: C, failed: _SessionFailed) -> None:
        """The session failed: the lock is gone; drop an owned connection so it cannot linger."""
        if self._held:
            error = str(failed.__cause__)
            log.warning("leader-lock-lost", extra={"lock_key": self.lock_key, "error": error})
        self._held = False
        if conn is self._conn and (self._conn_owned or not self._is_open(conn)):
            await self._forget(conn)

    async def _forget(self, conn: C) -> None:
        self._conn = None
        if self._conn_owned:
            await self._dispose(conn)


__all__ = ["LEADER_LOCK_PURPOSE", "OPERATION_TIMEOUT", "AdvisoryLeaderLock", "LeaderQuery"]
