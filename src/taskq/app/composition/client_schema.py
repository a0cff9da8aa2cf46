"""A client refuses a schema behind its code: one query, when it opens.

The worker checks the schema at start; a client does the same, so an
application deployed before ``taskq migrate up`` fails at once with
``SchemaNotMigrated`` naming the missing migrations, instead of writing jobs
that a new worker cannot read, or failing later on a missing column. A schema
*ahead* of the code (a newer TaskQ migrated it) is accepted: migrations only
add, and rolling a deploy back must keep working.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from taskq.adapters.postgres.migrator import check_schema_current, discover_migrations

if TYPE_CHECKING:
    from taskq.adapters.postgres.store import PooledQueueStore


async def check_client_schema(store: PooledQueueStore[Any]) -> None:
    """Raise ``SchemaNotMigrated`` (naming the missing migrations) when ``store``'s schema
    lacks one of this TaskQ's migrations; a schema with newer ones passes."""
    applied = await store.applied_migration_versions()
    check_schema_current(discover_migrations(), applied, schema=store.schema.name)


class SchemaCheckedStore:
    """A client store on a caller's pool that checks the schema before its first call.

    Built without awaiting (``JobsClient.from_*_pool`` is synchronous), so the
    check runs when the client first uses the database, enqueues on a caller's
    connection included; it runs on the pool. A failed check is repeated on
    the next call, so migrating the schema lets the same client go on.
    Everything else is the wrapped store's.
    """

    def __init__(self, store: PooledQueueStore[Any]) -> None:
        self._store = store
        self._checked = False
        self._checking = asyncio.Lock()

    def __repr__(self) -> str:
        return repr(self._store)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def ensure_schema(self) -> None:
        """Check the schema once; later calls return at once."""
        if self._checked:
            return
        async with self._checking:
            if not self._checked:
                await check_client_schema(self._store)
                self._checked = True

    async def enqueue(self, *args: Any, **kwargs: Any) -> Any:
        await self.ensure_schema()
        return await self._store.enqueue(*args, **kwargs)

    async def enqueue_many(self, *args: Any, **kwargs: Any) -> Any:
        await self.ensure_schema()
        return await self._store.enqueue_many(*args, **kwargs)

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        await self.ensure_schema()
        return await self._store.get(*args, **kwargs)

    async def attempts(self, *args: Any, **kwargs: Any) -> Any:
        await self.ensure_schema()
        return await self._store.attempts(*args, **kwargs)

    async def request_cancel(self, *args: Any, **kwargs: Any) -> Any:
        await self.ensure_schema()
        return await self._store.request_cancel(*args, **kwargs)

    async def close(self) -> None:
        await self._store.close()

    def bound_to(self, connection: Any, /) -> _SchemaCheckedEnqueuer:
        driver_store: Any = self._store  # the asyncpg and psycopg stores bind connections
        return _SchemaCheckedEnqueuer(self, driver_store.bound_to(connection))


class _SchemaCheckedEnqueuer:
    """An enqueuer on a caller's connection whose store checks the schema first."""

    def __init__(self, owner: SchemaCheckedStore, bound: Any) -> None:
        self._owner = owner
        self._bound = bound

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bound, name)

    async def enqueue(self, *args: Any, **kwargs: Any) -> Any:
        await self._owner.ensure_schema()
        return await self._bound.enqueue(*args, **kwargs)

    async def enqueue_many(self, *args: Any, **kwargs: Any) -> Any:
        await self._owner.ensure_schema()
        return await self._bound.enqueue_many(*args, **kwargs)


__all__ = ["SchemaCheckedStore", "check_client_schema"]
