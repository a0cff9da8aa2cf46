"""The Postgres rate limiter on a psycopg pool (see ``postgres.rate_limit``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from psycopg.rows import dict_row

from taskq.adapters.postgres.rate_limit import (
    QUERY_FAMILY,
    PostgresRateLimiter,
    RateQuery,
)
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import psycopg_queries
from taskq.adapters.psycopg.leader_lock import CONNECTION_FAILURES

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from taskq.ports.rate_limiter import RateLimiter


class PsycopgRateLimiter(PostgresRateLimiter):
    """``RateLimiter`` on ``rate_limit_windows`` / ``reservation_slots`` through ``pool``.

    The pool is caller-owned and never closed here. Each call takes one
    pooled connection for one statement; on a connection that is not in
    autocommit the pool commits it when the connection goes back.
    """

    connection_failures: ClassVar[tuple[type[Exception], ...]] = CONNECTION_FAILURES

    def __init__(self, pool: AsyncConnectionPool[Any], *, schema: Schema) -> None:
        super().__init__(schema=schema)
        self._pool = pool
        self._queries = psycopg_queries(QUERY_FAMILY, schema)

    async def _fetch_one(
        self, query: RateQuery, params: Mapping[str, object]
    ) -> Mapping[str, Any] | None:
        rendered = self._queries[query]
        args = rendered.bind(params)
        async with (
            self._pool.connection() as conn,
            conn.cursor(row_factory=dict_row) as cursor,
        ):
            await cursor.execute(rendered.sql, args, binary=True)  # DateStyle-proof
            row: dict[str, Any] | None = await cursor.fetchone()
        return row


if TYPE_CHECKING:

    def _conforms(pool: AsyncConnectionPool[Any], schema: Schema) -> RateLimiter:
        return PsycopgRateLimiter(pool, schema=schema)


__all__ = ["PsycopgRateLimiter"]
