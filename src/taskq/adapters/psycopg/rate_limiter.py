"""The Postgres rate limiter on a psycopg pool (see ``postgres.rate_limit``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row

from taskq.adapters.postgres.rate_limit import (
    OPERATION_TIMEOUT,
    QUERY_FAMILY,
    PostgresRateLimiter,
    RateQuery,
)
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import psycopg_queries
from taskq.adapters.psycopg.leader_lock import CONNECTION_FAILURES
from taskq.domain.errors import RateLimitUnavailable

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from taskq.ports.rate_limiter import RateLimiter


class PsycopgRateLimiter(PostgresRateLimiter):
    """``RateLimiter`` on ``rate_limit_windows`` / ``reservation_slots`` through ``pool``.

    The pool is caller-owned and never closed here. Each call takes one
    pooled connection for one statement; on a connection that is not in
    autocommit the pool commits it when the connection goes back.
    """

    def __init__(self, pool: AsyncConnectionPool[Any], *, schema: Schema) -> None:
        super().__init__(schema=schema)
        self._pool = pool
        self._queries = psycopg_queries(QUERY_FAMILY, schema)

    async def _fetchrow(self, query: RateQuery, params: Mapping[str, object]) -> Mapping[str, Any]:
        rendered = self._queries[query]
        args = rendered.bind(params)
        try:
            async with (
                asyncio.timeout(OPERATION_TIMEOUT),
                self._pool.connection() as conn,
                conn.cursor(row_factory=dict_row) as cursor,
            ):
                await cursor.execute(rendered.sql, args)
                row: dict[str, Any] | None = await cursor.fetchone()
        except CONNECTION_FAILURES as exc:
            raise RateLimitUnavailable(f"postgres rate limiter failed: {exc!r}") from exc
        if row is None:  # every rate_limits query returns exactly one row
            raise RateLimitUnavailable(f"postgres rate limiter: {query} returned no row")
        return row


if TYPE_CHECKING:

    def _conforms(pool: AsyncConnectionPool[Any], schema: Schema) -> RateLimiter:
        return PsycopgRateLimiter(pool, schema=schema)


__all__ = ["PsycopgRateLimiter"]
