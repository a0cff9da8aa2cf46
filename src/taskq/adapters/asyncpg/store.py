"""AsyncpgQueueStore: the Postgres QueueStore on asyncpg.

Connection ownership (the connections reference's rule): given a DSN the
store builds its own pool on first use (or on :meth:`open`) and closes it in
:meth:`close`; given an ``asyncpg.Pool`` the pool is the caller's and is never
closed here. :meth:`bound_to` enqueues on the caller's own connection and
transaction.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from taskq.adapters.asyncpg.driver import (
    AnyConnection,
    AsyncpgConnectionDriver,
    AsyncpgPoolDriver,
    Pool,
    render_store_queries,
)
from taskq.adapters.asyncpg.pool import (
    DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
    DEFAULT_STATEMENT_CACHE_SIZE,
    PoolOptions,
    create_pool,
)
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store import BoundEnqueuer, LockBudgets, PostgresQueueStore
from taskq.domain.errors import StoreUnavailable


class AsyncpgQueueStore(PostgresQueueStore):
    """``QueueStore`` on asyncpg.

    ``source`` is a DSN (TaskQ-owned pool of ``min_size``..``max_size``
    connections, built with the statement-cache settings: ``pooled=True``
    means a transaction-mode pooler, so no statement cache) or an
    ``asyncpg.Pool`` (caller-owned; the pool options are ignored). The
    composition root passes the settings' values; adapters never read them.
    """

    def __init__(
        self,
        source: str | Pool,
        *,
        schema: Schema | None = None,
        budgets: LockBudgets | None = None,
        statement_cache_size: int = DEFAULT_STATEMENT_CACHE_SIZE,
        max_cached_statement_lifetime: int = DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
        pooled: bool = False,
        min_size: int = 1,
        max_size: int = 10,
        command_timeout: float | None = None,
    ) -> None:
        schema = schema or Schema()
        self._queries = render_store_queries(schema)
        self._dsn: str | None = None
        self._pool: Pool | None = None
        if isinstance(source, str):
            self._dsn = source
        else:
            self._pool = source
        self._owns_pool = self._dsn is not None
        self._pool_options = PoolOptions(
            min_size=min_size,
            max_size=max_size,
            statement_cache_size=statement_cache_size,
            max_cached_statement_lifetime=max_cached_statement_lifetime,
            pooled=pooled,
            command_timeout=command_timeout,
        )
        self._opening = asyncio.Lock()
        super().__init__(
            AsyncpgPoolDriver(self._get_pool, self._queries),
            schema=schema,
            budgets=budgets,
            on_close=self._close_pool,
        )

    @property
    def owns_pool(self) -> bool:
        """Whether :meth:`close` closes the pool (True only for a pool built from a DSN)."""
        return self._owns_pool

    async def open(self) -> None:
        """Build the pool now (else the first call does); fails fast when unreachable."""
        await self._get_pool()

    async def pool(self) -> Pool:
        """The pool this store runs on (built first when it came from a DSN)."""
        return await self._get_pool()

    def bound_to(self, conn: AnyConnection) -> BoundEnqueuer:
        """A ``JobEnqueuer`` on ``conn``, inside whatever transaction it is in.

        Jobs enqueued through it become visible when that transaction
        commits and vanish when it rolls back. The connection stays the
        caller's; this store's schema and lock budgets apply.
        """
        return self._bound_enqueuer(AsyncpgConnectionDriver(conn, self._queries))

    async def _get_pool(self) -> Pool:
        if self._pool is not None:
            return self._pool
        if self._closed:
            raise StoreUnavailable("Postgres store is closed")
        async with self._opening:
            if self._pool is None:
                assert self._dsn is not None
                self._pool = await create_pool(self._dsn, self._pool_options)
            return self._pool

    async def _close_pool(self) -> None:
        if self._owns_pool and self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()


if TYPE_CHECKING:
    from taskq.ports.queue_store import JobEnqueuer, QueueStore

    def _conforms(dsn: str) -> QueueStore:
        return AsyncpgQueueStore(dsn)

    def _bound_conforms(store: AsyncpgQueueStore, conn: AnyConnection) -> JobEnqueuer:
        return store.bound_to(conn)


__all__ = ["AsyncpgQueueStore"]
