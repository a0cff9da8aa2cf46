"""The Postgres rate limiter on an asyncpg pool (see ``postgres.rate_limit``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from taskq.adapters.asyncpg.leader_lock import CONNECTION_FAILURES
from taskq.adapters.postgres.rate_limit import (
    QUERY_FAMILY,
    PostgresRateLimiter,
    RateQuery,
)
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import numbered_queries

if TYPE_CHECKING:
    import asyncpg

    from taskq.ports.rate_limiter import RateLimiter


class AsyncpgRateLimiter(PostgresRateLimiter):
    """``RateLimiter`` on ``rate_limit_windows`` / ``reservation_slots`` through ``pool``.

    The pool is caller-owned and never closed here. Each call takes one
    pooled connection for one statement (no explicit transaction), so it
    works behind a transaction-mode pooler too.
    """

    connection_failures: ClassVar[tuple[type[Exception], ...]] = CONNECTION_FAILURES

    def __init__(self, pool: asyncpg.Pool[Any], *, schema: Schema) -> None:
        super().__init__(schema=schema)
        self._pool = pool
        self._queries = numbered_queries(QUERY_FAMILY, schema)

    async def _fetch_one(
        self, query: RateQuery, params: Mapping[str, object]
    ) -> Mapping[str, Any] | None:
        rendered = self._queries[query]
        args = rendered.bind(params)
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(rendered.sql, *args)
        return None if row is None else dict(row.items())


if TYPE_CHECKING:

    def _conforms(pool: asyncpg.Pool[Any], schema: Schema) -> RateLimiter:
        return AsyncpgRateLimiter(pool, schema=schema)


__all__ = ["AsyncpgRateLimiter"]
