"""psycopg: each connection keeps one statement cursor between statements.

A new cursor per statement was a fifth of a statement's client work; keeping
one must never mix up two statements' rows, carry a failure over, or hold a
large result alive.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from taskq.adapters.postgres.sql_loader import NumberedQuery
from taskq.adapters.psycopg.driver import PsycopgConnectionDriver
from taskq.domain.errors import StoreUnavailable

pytestmark = pytest.mark.integration

QUERIES = {
    "echo": NumberedQuery("echo", "SELECT $1::int AS n, pg_sleep($2::float8) AS slept", ("n", "s")),
    "series": NumberedQuery("series", "SELECT g AS n FROM generate_series(1, $1::int) g", ("n",)),
    "divide": NumberedQuery("divide", "SELECT 1 / $1::int AS q", ("d",)),
}


@pytest.fixture
async def conn(dsn: str) -> AsyncIterator[psycopg.AsyncConnection[object]]:
    connection = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        yield connection
    finally:
        await connection.close()


def kept_cursor(conn: psycopg.AsyncConnection[object]) -> object:
    return vars(conn).get("_taskq_raw_cursor")


async def test_back_to_back_statements_share_one_cursor(
    conn: psycopg.AsyncConnection[object],
) -> None:
    driver = PsycopgConnectionDriver(conn, QUERIES)
    assert await driver.fetchval("echo", n=1, s=0) == 1
    first = kept_cursor(conn)
    assert first is not None
    assert await driver.fetchval("echo", n=2, s=0) == 2
    assert kept_cursor(conn) is first


async def test_concurrent_statements_on_one_connection_each_get_their_own_rows(
    conn: psycopg.AsyncConnection[object],
) -> None:
    """The kept cursor is taken out while in use: a statement queued behind it on the
    same connection makes its own, and neither sees the other's rows."""
    driver = PsycopgConnectionDriver(conn, QUERIES)
    rows = await asyncio.gather(
        driver.fetch("series", n=3),
        driver.fetch("series", n=5),
        driver.fetch("series", n=1),
        driver.fetch("series", n=4),
        driver.fetchrow("echo", n=7, s=0.05),
    )
    assert [[r["n"] for r in result] for result in rows[:4]] == [
        [1, 2, 3],
        [1, 2, 3, 4, 5],
        [1],
        [1, 2, 3, 4],
    ]
    assert rows[4] is not None
    assert rows[4]["n"] == 7


async def test_a_failed_statement_leaves_the_next_one_a_clean_cursor(
    conn: psycopg.AsyncConnection[object],
) -> None:
    driver = PsycopgConnectionDriver(conn, QUERIES)
    assert await driver.fetchval("divide", d=1) == 1
    with pytest.raises(Exception, match="division by zero"):
        await driver.fetchval("divide", d=0)
    assert kept_cursor(conn) is None
    assert await driver.fetch("series", n=2) == [{"n": 1}, {"n": 2}]


async def test_a_large_result_is_not_kept_alive(conn: psycopg.AsyncConnection[object]) -> None:
    driver = PsycopgConnectionDriver(conn, QUERIES)
    assert len(await driver.fetch("series", n=5_000)) == 5_000
    assert kept_cursor(conn) is None
    assert len(await driver.fetch("series", n=10)) == 10
    assert kept_cursor(conn) is not None


async def test_a_closed_connection_fails_as_unavailable_with_a_kept_cursor(
    conn: psycopg.AsyncConnection[object],
) -> None:
    driver = PsycopgConnectionDriver(conn, QUERIES)
    await driver.fetchval("echo", n=1, s=0)
    await conn.close()
    with pytest.raises(StoreUnavailable):
        await driver.fetchval("echo", n=2, s=0)
