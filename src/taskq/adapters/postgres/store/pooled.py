"""PooledQueueStore: the Postgres store on a pool it either builds or borrows.

Connection ownership (the connections reference's rule): given a DSN the
store builds its own pool on first use (or on :meth:`open`) and closes it in
:meth:`close`; given a zero-argument async pool factory, the store calls it
once, lazily, and owns (closes) the pool it returns; given a pool, the pool is
the caller's and is never closed here. Driver pools are not callable, which is
how a factory is told apart from a pool. The asyncpg and psycopg stores
supply only the pool builder and the driver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

from taskq.adapters.postgres.driver import Driver
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store.base import LockBudgets
from taskq.adapters.postgres.store.queue_store import PostgresQueueStore
from taskq.domain.errors import StoreClosed


class ClosablePool(Protocol):
    """What the store needs of a pool it owns: a way to close it."""

    async def close(self) -> None: ...


PoolT = TypeVar("PoolT", bound=ClosablePool)


class PooledQueueStore(PostgresQueueStore, Generic[PoolT]):
    """``QueueStore`` on a DSN-built (owned) or caller-owned pool.

    ``driver`` builds the store's driver from the pool getter (awaited on
    each use, so the pool can open lazily); ``create_pool`` opens a pool on
    a DSN with the driver's pool options.
    """

    def __init__(
        self,
        source: str | PoolT | Callable[[], Awaitable[PoolT]],
        *,
        schema: Schema,
        budgets: LockBudgets | None,
        driver: Callable[[Callable[[], Awaitable[PoolT]]], Driver],
        create_pool: Callable[[str], Awaitable[PoolT]],
    ) -> None:
        self._dsn: str | None = None
        self._pool: PoolT | None = None
        self._factory: Callable[[], Awaitable[PoolT]] | None = None
        if isinstance(source, str):
            self._dsn = source
        elif callable(source):
            self._factory = source
        else:
            self._pool = source
        self._owns_pool = self._pool is None
        self._create_pool = create_pool
        self._opening = asyncio.Lock()
        super().__init__(
            driver(self._get_pool), schema=schema, budgets=budgets, on_close=self._close_pool
        )

    async def open(self) -> None:
        """Build the pool now (else the first call does); fails fast when unreachable."""
        await self._get_pool()

    async def pool(self) -> PoolT:
        """The pool this store runs on (built first when it came from a DSN or a factory)."""
        return await self._get_pool()

    async def _get_pool(self) -> PoolT:
        if self._pool is not None:
            return self._pool
        if self._closed:
            raise StoreClosed("Postgres store is closed")
        self._check_loop()
        async with self._opening:
            if self._pool is None:
                if self._factory is not None:
                    # Called once: a failed call is retried on next use, a pool is kept.
                    self._pool = await self._factory()
                else:
                    assert self._dsn is not None
                    self._pool = await self._create_pool(self._dsn)
            return self._pool

    async def _close_pool(self) -> None:
        if self._owns_pool and self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()


__all__ = ["ClosablePool", "PooledQueueStore"]
