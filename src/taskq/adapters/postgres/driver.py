"""The small driver protocol the Postgres store core runs on.

The store core (``taskq.adapters.postgres.store``) holds every rule and names
queries; a driver (asyncpg or psycopg) only binds parameters, runs the query
and translates errors. Queries are named as in ``queries/<family>.sql`` (names
are unique across :data:`STORE_QUERY_FAMILIES`); parameters are keywords.

Error boundary: a driver raises only domain errors and the three internal
signals below, all ``from`` the driver's own exception:

- connection lost, server unreachable, pool closed, statement timeout, a server
  that cannot serve now (out of disk or memory, too many connections, I/O error)
  or only reads (a standby: SQLSTATE 25006) → :class:`~taskq.domain.errors.StoreUnavailable`;
- a transaction an earlier error aborted (25P02) → :class:`~taskq.domain.errors.TransactionAborted`;
- ``lock_timeout`` expired (SQLSTATE 55P03) → :class:`LockTimeout`;
- a unique index refused a row (23505) → :class:`UniqueConflict`;
- deadlock or serialization failure (40P01, 40001) → :class:`TransientConflict`;
- a value the database cannot store (class 22, check violations 23514, class 54: a
  value beyond a server limit, such as a jsonb document over 255 MB)
  → ``ValueError``, as the memory adapter raises for unstorable values;
- a missing schema, table, column, function or type (the schema was never
  migrated, or is older than this TaskQ) → :class:`~taskq.domain.errors.SchemaNotMigrated`;
- a privilege the role lacks (42501) → :class:`~taskq.domain.errors.ConfigurationError`.

The core turns the internal signals into the matching domain error (a lock
timeout while waiting for the max_pending lock is ``MaxPendingLockTimeoutError``)
or retries; should one escape anyway, it is still a ``StoreUnavailable``.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, Final, Protocol

from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import NumberedQuery, Query, load_queries
from taskq.domain.errors import (
    ConfigurationError,
    PoolWaitTimeout,
    SchemaNotMigrated,
    StoreUnavailable,
    TaskQError,
    TransactionAborted,
)

#: The query files the store core uses; a driver renders all of them once.
STORE_QUERY_FAMILIES: Final = (
    "enqueue",
    "claim",
    "finish",
    "workers",
    "reads",
    "cancel",
    "maintenance",
    "retention",
    "actor_config",
    "queues",
    "admin",
)

#: SQLSTATEs the drivers translate.
SQLSTATE_LOCK_NOT_AVAILABLE: Final = "55P03"
#: invalid_sql_statement_name, duplicate_prepared_statement: what a transaction-mode
#: pooler does to a session's prepared statements.
SQLSTATE_PREPARED_STATEMENT: Final = ("26000", "42P05")
SQLSTATE_UNIQUE_VIOLATION: Final = "23505"
SQLSTATE_CHECK_VIOLATION: Final = "23514"
SQLSTATE_NOT_NULL_VIOLATION: Final = "23502"
SQLSTATE_DEADLOCK: Final = "40P01"
SQLSTATE_SERIALIZATION: Final = "40001"
SQLSTATE_QUERY_CANCELED: Final = "57014"
#: A write on a server that only reads: a standby (a failover not yet finished, a DSN
#: pointing at a replica) or default_transaction_read_only.
SQLSTATE_READ_ONLY: Final = "25006"
#: A statement in a transaction an earlier error aborted (a caller's, for connection=).
SQLSTATE_IN_FAILED_TRANSACTION: Final = "25P02"
PROGRAM_LIMIT_CLASS: Final = "54"
SQLSTATE_INSUFFICIENT_PRIVILEGE: Final = "42501"
#: A missing schema, table, column, function or type: the schema is not (fully) migrated.
SQLSTATE_MISSING_OBJECT: Final = frozenset({"3F000", "42P01", "42703", "42883", "42704"})
#: Class 08 (connection exception) and class 57 (operator intervention) mean "unavailable".
#: 08 connection exception, 53 insufficient resources (disk full, out of memory, too many
#: connections), 57 operator intervention, 58 system error (I/O): the server cannot serve now.
UNAVAILABLE_CLASSES: Final = ("08", "53", "57", "58")
#: Class 22 (data exception): a value the column cannot hold.
DATA_EXCEPTION_CLASS: Final = "22"


class Row(Protocol):
    """A result row: columns by name (asyncpg ``Record``, a dict on psycopg)."""

    def __getitem__(self, key: str, /) -> Any: ...


class LockTimeout(StoreUnavailable):
    """``lock_timeout`` expired while a statement waited for a lock (55P03)."""


#: Seconds a query waits for a free connection of its pool before ``PoolExhausted``,
#: when its store has no call bound (``call_timeout``; a client's store has one, and
#: its bound governs the wait). Without a bound an exhausted pool (say, the app
#: holding every connection of the pool it shares with TaskQ) hangs the caller forever.
POOL_ACQUIRE_TIMEOUT: Final = 30.0


class PoolExhausted(PoolWaitTimeout):
    """No connection of the pool came free in time: every one is in use."""

    def __init__(self, size: int | None, timeout: float) -> None:
        super().__init__(
            timeout,
            "every connection is in use (a bigger pool, or fewer connections held elsewhere)",
            size=size,
        )


def pool_unreachable(timeout: float, size: int | None = None) -> PoolWaitTimeout:
    """The pool had room but could not open a connection in time."""
    return PoolWaitTimeout(
        timeout,
        "the pool could not open a connection to Postgres in time (the server or the "
        "network is down, or slow to accept connections)",
        size=size,
    )


class TransientConflict(StoreUnavailable):
    """Deadlock or serialization failure; the statement was rolled back and may be retried."""


class UniqueConflict(TaskQError):
    """A unique index refused a row; ``constraint`` names the index when known."""

    def __init__(self, message: str, constraint: str | None) -> None:
        super().__init__(message)
        self.constraint = constraint


class Driver(Protocol):
    """Runs named store queries on a pool (one statement per call) or on one connection.

    Each call on a pool-backed driver is its own implicit transaction.
    :meth:`transaction` yields a driver bound to one connection inside a
    transaction (a savepoint when the connection already is in one), which
    commits on normal exit and rolls back on an exception.

    A driver built with a ``call_timeout`` (seconds; its ``call_timeout``
    attribute) runs each call in a :class:`~taskq.adapters.postgres.call_budget.CallBudget`:
    it ends within that time with a ``StoreTimeout`` saying what it waited for.
    """

    async def fetch(self, query: str, /, **params: object) -> Sequence[Row]: ...

    async def fetchrow(self, query: str, /, **params: object) -> Row | None: ...

    async def fetchval(self, query: str, /, **params: object) -> Any: ...

    async def execute(self, query: str, /, **params: object) -> None: ...

    async def copy_in(
        self, schema: str, table: str, columns: Sequence[str], data: Iterable[bytes]
    ) -> None:
        """``COPY schema.table (columns) FROM STDIN`` of ``data``, in COPY's text format.

        ``data`` is consumed chunk by chunk while the statement runs, so the
        server loads one chunk while the next is produced; an exception from
        it aborts the COPY and propagates. One statement: all rows or none
        (its own transaction on a pool).
        """
        ...

    def transaction(self) -> AbstractAsyncContextManager[Driver]: ...


def store_queries() -> Mapping[str, Query]:
    """Every store query by name, across :data:`STORE_QUERY_FAMILIES` (names are unique)."""
    merged: dict[str, Query] = {}
    for family in STORE_QUERY_FAMILIES:
        for name, query in load_queries(family).items():
            if name in merged:
                raise ValueError(
                    f"query name {name!r} is in {merged[name].source} and {query.source}"
                )
            merged[name] = query
    return merged


def render_store_queries(schema: Schema) -> Mapping[str, NumberedQuery]:
    """Every store query with ``$n`` placeholders in ``schema``: what asyncpg runs, and
    what psycopg's raw cursors run."""
    return {name: query.numbered(schema) for name, query in store_queries().items()}


#: A driver's map from its errors to domain errors or driver signals (None: not its to map).
Translation = Callable[[BaseException], BaseException | None]


@contextmanager
def translating(translation: Translation) -> Iterator[None]:
    """Raise what ``translation`` maps an error to (from the original), else the error."""
    try:
        yield
    except Exception as exc:
        error = translation(exc)
        if error is None:
            raise
        raise error from exc


def error_reason(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type name when it has none), with the
    server's detail when it gave one (what exactly was wrong with a value, say)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    detail = getattr(exc, "detail", None) or getattr(
        getattr(exc, "diag", None), "message_detail", None
    )
    return f"{first} ({detail})" if isinstance(detail, str) and detail else first


def connect_reason(exc: BaseException) -> str:
    """Why opening a connection failed, in the same words whichever step tried it
    (``connection refused`` rather than ``[Errno 111] Connect call failed (...)``)."""
    if isinstance(exc, ConnectionRefusedError) or (
        isinstance(exc, OSError) and "[Errno 111]" in str(exc)  # one per address tried
    ):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, FileNotFoundError):
        return "no server socket there"
    reason = error_reason(exc)
    # psycopg (libpq) repeats where it connected, which the caller's message already says.
    said = _LIBPQ_CONNECT_FAILED.match(reason)
    if said is None:
        return reason
    return "connection refused" if said["why"] == "Connection refused" else said["why"]


#: libpq's ``connection failed: connection to server at "HOST", port N failed: WHY``.
_LIBPQ_CONNECT_FAILED: Final = re.compile(
    r'^connection failed: connection to server (?:at "[^"]*", port \d+|on socket "[^"]*") '
    r"failed: (?:FATAL: +)?(?P<why>.+)$"
)


def sqlstate_error(sqlstate: str | None, reason: str, constraint: str | None) -> Exception | None:
    """The domain error or driver signal a failed statement's SQLSTATE means, if any.

    ``None``: the state has no translation and the driver's error goes on.
    The driver raises what this returns ``from`` its own exception.
    """
    if sqlstate == SQLSTATE_LOCK_NOT_AVAILABLE:
        return LockTimeout(f"lock wait timed out: {reason}")
    if sqlstate == SQLSTATE_UNIQUE_VIOLATION:
        return UniqueConflict(reason, constraint)
    if sqlstate in (SQLSTATE_DEADLOCK, SQLSTATE_SERIALIZATION):
        return TransientConflict(f"transaction conflict: {reason}")
    if sqlstate == SQLSTATE_READ_ONLY:
        return StoreUnavailable(
            f"Postgres is unavailable for writes: {reason} (the transaction or the server "
            "is read-only: a READ ONLY transaction, default_transaction_read_only, or a "
            "standby; TaskQ needs the primary and a read-write transaction)"
        )
    if sqlstate == SQLSTATE_IN_FAILED_TRANSACTION:
        return TransactionAborted(
            f"the transaction TaskQ was given had already failed ({reason}): an earlier "
            "statement in it raised an error; roll it back (nothing was written)"
        )
    if unavailable_sqlstate(sqlstate):
        return StoreUnavailable(f"Postgres is unavailable: {reason}")
    if value_sqlstate(sqlstate):
        return ValueError(f"Postgres cannot store a value: {reason}")
    if sqlstate in SQLSTATE_PREPARED_STATEMENT:
        return ConfigurationError(
            f"a prepared statement went missing or was duplicated ({reason}): the connection "
            "goes through a transaction-mode pooler (PgBouncer) with prepared statements on; "
            "set TASKQ_PG_IS_POOLED=true for TaskQ's own pools, and on a pool of yours turn "
            "them off (asyncpg statement_cache_size=0, psycopg prepare_threshold=None)"
        )
    if sqlstate == SQLSTATE_INSUFFICIENT_PRIVILEGE:
        return ConfigurationError(
            f"the database role TaskQ connects as lacks a privilege it needs ({reason}): "
            "grant it USAGE on the TaskQ schema, SELECT, INSERT, UPDATE and DELETE on the "
            "schema's tables and USAGE on its sequences, or connect as the role that ran "
            "`taskq migrate up`"
        )
    if sqlstate in SQLSTATE_MISSING_OBJECT:
        return SchemaNotMigrated(
            f"the database lacks what TaskQ needs ({reason}): is the TaskQ schema migrated? "
            "Run `taskq migrate up` on this database and schema (TASKQ_PG_DSN, "
            "TASKQ_SCHEMA_NAME)"
        )
    return None


def unavailable_sqlstate(sqlstate: str | None) -> bool:
    """Whether ``sqlstate`` means the server went away or refused to go on."""
    if sqlstate is None:
        return False
    return sqlstate == SQLSTATE_QUERY_CANCELED or sqlstate[:2] in UNAVAILABLE_CLASSES


def value_sqlstate(sqlstate: str | None) -> bool:
    """Whether ``sqlstate`` means the database cannot store a given value."""
    if sqlstate is None:
        return False
    # Class 54: a value beyond a server limit (a jsonb document over 255 MB, say).
    return sqlstate[:2] in (DATA_EXCEPTION_CLASS, PROGRAM_LIMIT_CLASS) or sqlstate in (
        SQLSTATE_CHECK_VIOLATION,
        SQLSTATE_NOT_NULL_VIOLATION,
    )


__all__ = [
    "POOL_ACQUIRE_TIMEOUT",
    "STORE_QUERY_FAMILIES",
    "Driver",
    "LockTimeout",
    "PoolExhausted",
    "Row",
    "TransientConflict",
    "Translation",
    "UniqueConflict",
    "connect_reason",
    "error_reason",
    "pool_unreachable",
    "render_store_queries",
    "sqlstate_error",
    "store_queries",
    "translating",
    "unavailable_sqlstate",
    "value_sqlstate",
]
