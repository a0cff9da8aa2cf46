"""PsycopgQueueStore: the Postgres QueueStore on psycopg 3.

Connection ownership (the connections reference's rule, kept by
:class:`~taskq.adapters.postgres.store.pooled.PooledQueueStore`): given a DSN
the store builds its own pool on first use (or on :meth:`open`) and closes it
in :meth:`close`; given a ``psycopg_pool.AsyncConnectionPool`` the pool is the
caller's and is never closed here. :meth:`bound_to` enqueues on the caller's
own connection and transaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from taskq.adapters.postgres.driver import render_store_queries
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store import BoundEnqueuer, LockBudgets, PooledQueueStore
from taskq.adapters.psycopg.checkout import Connection, Pool, caller_connection
from taskq.adapters.psycopg.driver import PsycopgConnectionDriver, PsycopgPoolDriver
from taskq.adapters.psycopg.pool import (
    DEFAULT_PREPARE_THRESHOLD,
    DEFAULT_PREPARED_MAX,
    PoolOptions,
    create_pool,
)


class PsycopgQueueStore(PooledQueueStore[Pool]):
    """``QueueStore`` on psycopg 3.

    ``source`` is a DSN (TaskQ-owned pool of ``min_size``..``max_size``
    autocommit connections; ``statement_cache_size`` bounds prepared
    statements per connection, and ``pooled=True`` — a transaction-mode
    pooler — prepares none) or an ``AsyncConnectionPool`` (caller-owned; the
    pool options are ignored, and connections that are not in autocommit cost
    a BEGIN/COMMIT per call) or a zero-argument async factory of an opened
    one (called once, lazily; TaskQ-owned). The composition root passes the settings'
    values; adapters never read them.

    ``call_timeout`` (seconds; a client's ``TASKQ_CLIENT_CALL_TIMEOUT``) bounds
    every call, :meth:`bound_to` enqueues included: it ends within that time with
    a ``StoreTimeout`` saying what it waited for (``postgres.call_budget``). None,
    a worker's store, leaves the bounds to the worker.
    """

    def __init__(
        self,
        source: str | Pool | Callable[[], Awaitable[Pool]],
        *,
        schema: Schema | None = None,
        budgets: LockBudgets | None = None,
        statement_cache_size: int = DEFAULT_PREPARED_MAX,
        prepare_threshold: int = DEFAULT_PREPARE_THRESHOLD,
        pooled: bool = False,
        min_size: int = 1,
        max_size: int = 10,
        max_inactive_lifetime: float = 300.0,
        call_timeout: float | None = None,
    ) -> None:
        schema = schema or Schema()
        self._queries = render_store_queries(schema)
        self._call_timeout = call_timeout
        options = PoolOptions(
            min_size=min_size,
            max_size=max_size,
            max_inactive_lifetime=max_inactive_lifetime,
            statement_cache_size=statement_cache_size,
            prepare_threshold=prepare_threshold,
            pooled=pooled,
        )
        super().__init__(
            source,
            schema=schema,
            budgets=budgets,
            driver=lambda pool: PsycopgPoolDriver(pool, self._queries, call_timeout=call_timeout),
            create_pool=lambda dsn: create_pool(dsn, options),
        )

    def bound_to(self, conn: Connection) -> BoundEnqueuer:
        """A ``JobEnqueuer`` on ``conn``, inside whatever transaction it is in.

        Jobs enqueued through it become visible when that transaction
        commits and vanish when it rolls back (on a connection that is not in
        autocommit, that is the transaction psycopg opens implicitly). The
        connection stays the caller's; this store's schema and budgets apply. Calls on
        one connection take turns. Anything but a ``psycopg.AsyncConnection`` raises
        ``TypeError``; one in pipeline mode ``ValueError``.
        """
        checked = caller_connection(conn)
        driver = PsycopgConnectionDriver(checked, self._queries, call_timeout=self._call_timeout)
        return self._bound_enqueuer(driver, checked)


if TYPE_CHECKING:
    from taskq.ports.queue_store import JobEnqueuer, QueueStore

    def _conforms(dsn: str) -> QueueStore:
        return PsycopgQueueStore(dsn)

    def _bound_conforms(store: PsycopgQueueStore, conn: Connection) -> JobEnqueuer:
        return store.bound_to(conn)


__all__ = ["PsycopgQueueStore"]
