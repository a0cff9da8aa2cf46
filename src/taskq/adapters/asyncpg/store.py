"""AsyncpgQueueStore: the Postgres QueueStore on asyncpg.

Connection ownership (the connections reference's rule, kept by
:class:`~taskq.adapters.postgres.store.pooled.PooledQueueStore`): given a DSN
the store builds its own pool on first use (or on :meth:`open`) and closes it
in :meth:`close`; given an ``asyncpg.Pool`` the pool is the caller's and is
never closed here. :meth:`bound_to` enqueues on the caller's own connection
and transaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import asyncpg

from taskq.adapters.asyncpg.driver import (
    AnyConnection,
    AsyncpgConnectionDriver,
    AsyncpgPoolDriver,
    Pool,
    caller_connection,
)
from taskq.adapters.asyncpg.pool import (
    DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
    DEFAULT_STATEMENT_CACHE_SIZE,
    PoolOptions,
    create_pool,
)
from taskq.adapters.postgres.driver import render_store_queries
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store import BoundEnqueuer, LockBudgets, PooledQueueStore


class AsyncpgQueueStore(PooledQueueStore[Pool]):
    """``QueueStore`` on asyncpg.

    ``source`` is a DSN (TaskQ-owned pool of ``min_size``..``max_size``
    connections, built with the statement-cache settings: ``pooled=True``
    means a transaction-mode pooler, so no statement cache) or an
    ``asyncpg.Pool`` (caller-owned; the pool options are ignored) or a
    zero-argument async factory of one (called once, lazily; TaskQ-owned). The
    composition root passes the settings' values; adapters never read them.

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
        statement_cache_size: int = DEFAULT_STATEMENT_CACHE_SIZE,
        max_cached_statement_lifetime: int = DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
        pooled: bool = False,
        min_size: int = 1,
        max_size: int = 10,
        max_inactive_lifetime: float = 300.0,
        command_timeout: float | None = None,
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
            max_cached_statement_lifetime=max_cached_statement_lifetime,
            pooled=pooled,
            command_timeout=command_timeout,
        )
        super().__init__(
            source,
            schema=schema,
            budgets=budgets,
            driver=lambda pool: AsyncpgPoolDriver(
                pool,
                self._queries,
                known=source if isinstance(source, asyncpg.Pool) else None,
                call_timeout=call_timeout,
            ),
            create_pool=lambda dsn: create_pool(dsn, options),
        )

    def bound_to(self, conn: AnyConnection) -> BoundEnqueuer:
        """A ``JobEnqueuer`` on ``conn``, inside whatever transaction it is in.

        Jobs enqueued through it become visible when that transaction
        commits and vanish when it rolls back. The connection stays the
        caller's; this store's schema and lock budgets apply. Calls on one connection
        take turns. Anything but an asyncpg connection raises ``TypeError``.
        """
        raw = caller_connection(conn)
        driver = AsyncpgConnectionDriver(conn, self._queries, call_timeout=self._call_timeout)
        return self._bound_enqueuer(driver, raw)


if TYPE_CHECKING:
    from taskq.ports.queue_store import JobEnqueuer, QueueStore

    def _conforms(dsn: str) -> QueueStore:
        return AsyncpgQueueStore(dsn)

    def _bound_conforms(store: AsyncpgQueueStore, conn: AnyConnection) -> JobEnqueuer:
        return store.bound_to(conn)


__all__ = ["AsyncpgQueueStore"]
