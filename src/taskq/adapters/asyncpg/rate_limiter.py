"""The Postgres rate limiter on an asyncpg pool (see ``postgres.rate_limit``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from taskq.adapters.asyncpg.leader_lock import CONNECTION_FAILURES
from taskq.adapters.postgres.rate_limit import (
    OPERATION_TIMEOUT,
    QUERY_FAMILY,
    PostgresRateLimiter,
    RateQuery,
)
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import asyncpg_queries
from taskq.domain.errors import RateLimitUnavailable

if TYPE_CHECKING:
    import asyncpg

    from taskq.ports.rate_limiter import RateLimiter


class AsyncpgRateLimiter(PostgresRateLimiter):
    """``RateLimiter`` on ``rate_limit_windows`` / ``reservation_slots`` through ``pool``.

    The pool is caller-owned and never closed here. Each call takes one
    pooled connection for one statement (no explicit transaction), so it
    works behind a transaction-mode pooler too.
    """

    def __init__(self, pool: asyncpg.Pool[Any], *, schema: Schema) -> None:
        super().__init__(schema=schema)
        self._pool = pool
        self._queries = asyncpg_queries(QUERY_FAMILY, schema)

    async def _fetchrow(self, query: RateQuery, params: Mapping[str, object]) -> Mapping[str, Any]:
        rendered = self._queries[query]
        args = rendered.bind(params)
        try:
            async with asyncio.timeout(OPERATION_TIMEOUT), self._pool.acquire() as conn:
                row = await conn.fetchrow(rendered.sql, *args)
        except CONNECTION_FAILURES as exc:
            raise RateLimitUnavailable(f"postgres rate limiter failed: {exc!r}") from exc
        if row is None:  # every rate_limits query returns exactly one row
            raise RateLimitUnavailable(f"postgres rate limiter: {query} returned no row")
        return dict(row.items())


if TYPE_CHECKING:

    def _conforms(pool: asyncpg.Pool[Any], schema: Schema) -> RateLimiter:
        return AsyncpgRateLimiter(pool, schema=schema)


__all__ = ["AsyncpgRateLimiter"]
