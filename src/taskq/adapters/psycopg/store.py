"""PsycopgQueueStore: the Postgres QueueStore on psycopg 3.

Connection ownership (the connections reference's rule): given a DSN the
store builds its own pool on first use (or on :meth:`open`) and closes it in
:meth:`close`; given a ``psycopg_pool.AsyncConnectionPool`` the pool is the
caller's and is never closed here. :meth:`bound_to` enqueues on the caller's
own connection and transaction.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store import BoundEnqueuer, LockBudgets, PostgresQueueStore
from taskq.adapters.psycopg.driver import (
    Connection,
    Pool,
    PsycopgConnectionDriver,
    PsycopgPoolDriver,
    render_store_queries,
)
from taskq.adapters.psycopg.pool import (
    DEFAULT_PREPARE_THRESHOLD,
    DEFAULT_PREPARED_MAX,
    PoolOptions,
    create_pool,
)
from taskq.domain.errors import StoreUnavailable


class PsycopgQueueStore(PostgresQueueStore):
    """``QueueStore`` on psycopg 3.

    ``source`` is a DSN (TaskQ-owned pool of ``min_size``..``max_size``
    autocommit connections; ``statement_cache_size`` bounds prepared
    statements per connection, and ``pooled=True`` — a transaction-mode
    pooler — prepares none) or an ``AsyncConnectionPool`` (caller-owned; the
    pool options are ignored, and connections that are not in autocommit cost
    a BEGIN/COMMIT per call). The composition root passes the settings'
    values; adapters never read them.
    """

    def __init__(
        self,
        source: str | Pool,
        *,
        schema: Schema | None = None,
        budgets: LockBudgets | None = None,
        statement_cache_size: int = DEFAULT_PREPARED_MAX,
        prepare_threshold: int = DEFAULT_PREPARE_THRESHOLD,
        pooled: bool = False,
        min_size: int = 1,
        max_size: int = 10,
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
            prepare_threshold=prepare_threshold,
            pooled=pooled,
        )
        self._opening = asyncio.Lock()
        super().__init__(
            PsycopgPoolDriver(self._get_pool, self._queries),
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

    def bound_to(self, conn: Connection) -> BoundEnqueuer:
        """A ``JobEnqueuer`` on ``conn``, inside whatever transaction it is in.

        Jobs enqueued through it become visible when that transaction
        commits and vanish when it rolls back (on a connection that is not in
        autocommit, that is the transaction psycopg opens implicitly). The
        connection stays the caller's; this store's schema and budgets apply.
        """
        return self._bound_enqueuer(PsycopgConnectionDriver(conn, self._queries))

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
        return PsycopgQueueStore(dsn)

    def _bound_conforms(store: PsycopgQueueStore, conn: Connection) -> JobEnqueuer:
        return store.bound_to(conn)


__all__ = ["PsycopgQueueStore"]
