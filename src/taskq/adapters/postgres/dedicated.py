"""What the leader lock and the notifier share: one dedicated connection per driver.

Both hold a session of their own (an advisory lock lives as long as it,
LISTEN only works on it), so both need the same four driver hooks (open,
dispose, liveness, server pid) and the same notion of "the session failed".
A driver supplies the hooks once, as a mixin for both.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import ClassVar, Final, Generic, TypeVar

C = TypeVar("C")

#: Logged when a lost caller-owned session is replaced by one opened from the DSN.
DEDICATED_CONN_FROM_DSN: Final = "dedicated-conn-from-dsn"

_log = logging.getLogger("taskq.connections")

#: The first server version (server_version_num) with idle_session_timeout.
IDLE_SESSION_TIMEOUT_SINCE: Final = 140000


def session_setup(server_version_num: int) -> str:
    """What every session TaskQ opens directly sends first (its pools' and dedicated ones).

    - READ COMMITTED, whatever a role's or database's default: TaskQ's statements are
      written for it (a claim re-checks a row another claim changed, rather than
      failing as REPEATABLE READ or SERIALIZABLE would, again and again under load).
    - No idle-session timeout (Postgres 14+): a role's or database's would end a session
      that sits idle by design (a LISTEN between wake-ups, a held advisory lock, a pooled
      connection between uses), dropping wake-ups and leadership every few seconds.
    """
    setup = ["SET default_transaction_isolation = 'read committed'"]
    if server_version_num >= IDLE_SESSION_TIMEOUT_SINCE:
        setup.append("SET idle_session_timeout = 0")
    return "; ".join(setup)


class DedicatedConnection(ABC, Generic[C]):
    """A holder of one dedicated connection ``_conn``; ``C`` is the driver's connection type."""

    #: Exceptions of the driver that mean a connection or its statement failed.
    driver_errors: ClassVar[tuple[type[Exception], ...]] = ()

    _conn: C | None
    #: The role this session serves, as ``WorkerConnections`` names it.
    role: ClassVar[str] = "dedicated"
    #: Makes every replacement session (a ``WorkerConnections`` factory); None: the DSN.
    _connect: Callable[[], Awaitable[C]] | None = None
    #: The first session was the caller's, which TaskQ cannot rebuild.
    _caller_given: bool = False

    def _set_source(self, connect: Callable[[], Awaitable[C]] | None, *, given: bool) -> None:
        """Where replacement sessions come from: ``connect`` if set, else the DSN."""
        self._connect = connect
        self._caller_given = given

    async def _replacement(self, from_dsn: Callable[[], Awaitable[C]]) -> C:
        """A new session: from the factory (managed identities: the DSN may hold no
        credentials), else from the DSN, saying so when it replaces a caller's session."""
        if self._connect is not None:
            return await self._connect()
        if self._caller_given:
            _log.warning(
                DEDICATED_CONN_FROM_DSN,
                extra={
                    "role": self.role,
                    "reason": f"the caller's {self.role} cannot be rebuilt (pass "
                    f"{self.role}_factory instead); opening one from TASKQ_PG_DSN_DIRECT",
                },
            )
        return await from_dsn()

    @property
    def _failures(self) -> tuple[type[Exception], ...]:
        """Everything that means a connection failed: the driver's errors, OS errors, timeouts."""
        return (*self.driver_errors, OSError)

    def _setup_sql(self, server_version_num: int) -> str:
        """What a session this holder opens sends first (a subclass may add to it)."""
        return session_setup(server_version_num)

    @abstractmethod
    async def _open(self) -> C:
        """Open an owned autocommit connection from the DSN; raise ``StoreUnavailable`` if not."""

    @abstractmethod
    async def _dispose(self, conn: C) -> None:
        """Stop using and close an owned connection (bounded); never raises."""

    @abstractmethod
    def _is_open(self, conn: C) -> bool:
        """Whether the driver still considers ``conn`` usable."""

    @abstractmethod
    def _server_pid(self, conn: C) -> int | None:
        """The server process id of ``conn``'s session."""

    @property
    def backend_pid(self) -> int | None:
        """Server pid of the dedicated connection; None when there is no live one."""
        conn = self._conn
        if conn is None or not self._is_open(conn):
            return None
        return self._server_pid(conn)


__all__ = [
    "DEDICATED_CONN_FROM_DSN",
    "IDLE_SESSION_TIMEOUT_SINCE",
    "DedicatedConnection",
    "session_setup",
]
