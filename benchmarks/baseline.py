"""The raw-SQL baseline: the least a Postgres job queue can do, on the same server.

One minimal table (id, queue, payload, status, three timestamps; one partial
index on pending ids), written and drained with plain asyncpg and prepared
statements. It is what TaskQ's numbers are divided by: the ratio says how
much of what the server can do TaskQ delivers, whatever the machine.

- drain: ``loops`` concurrent connections, each claiming ``batch`` pending
  rows (``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED) RETURNING``,
  which stamps started_at) then completing them (``UPDATE … WHERE id =
  ANY($1)``, which stamps finished_at): two round trips per batch, autocommit.
- single insert: one prepared ``INSERT`` per row on one connection, autocommit
  (so one commit, one WAL flush, per row, as a single enqueue).
- bulk: ``COPY`` of the rows in one go.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import asyncpg
from bench_support import DbSpan, Stopwatch, db_span, plain_schema

TABLE_DDL = """
CREATE TABLE {table} (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue       text        NOT NULL DEFAULT 'bench',
    payload     jsonb       NOT NULL,
    status      text        NOT NULL DEFAULT 'pending',
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz
) WITH (fillfactor = 80);
CREATE INDEX ON {table} (id) WHERE status = 'pending';
"""

CLAIM_SQL = """
UPDATE {table} SET status = 'running', started_at = now()
WHERE id IN (
    SELECT id FROM {table} WHERE status = 'pending' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
)
RETURNING id
"""

COMPLETE_SQL = """
UPDATE {table} SET status = 'done', finished_at = now() WHERE id = ANY($1::bigint[])
"""

INSERT_SQL = "INSERT INTO {table} (payload) VALUES ($1::text::jsonb)"


def _payload(n: int) -> str:
    return json.dumps({"n": n}, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class DrainResult:
    span: DbSpan
    wall_seconds: float
    loops: int
    batch: int


async def create_table(conn: asyncpg.Connection, schema: str) -> str:
    """Create the baseline table in ``schema``; returns its quoted name."""
    table = f'"{schema}".raw_jobs'
    await conn.execute(TABLE_DDL.format(table=table))
    return table


async def copy_rows(conn: asyncpg.Connection, table: str, n: int) -> float:
    """COPY ``n`` pending rows into ``table``; returns the seconds it took."""
    schema, _, name = table.partition(".")
    records = [(_payload(i),) for i in range(n)]
    with Stopwatch() as sw:
        await conn.copy_records_to_table(
            name, schema_name=schema.strip('"'), records=records, columns=["payload"]
        )
    return sw.seconds


async def single_inserts(conn: asyncpg.Connection, table: str, n: int) -> float:
    """Insert ``n`` rows one prepared statement (one commit) each; returns the seconds."""
    statement = await conn.prepare(INSERT_SQL.format(table=table))
    payloads = [_payload(i) for i in range(n)]
    with Stopwatch() as sw:
        for payload in payloads:
            await statement.fetchval(payload)
    return sw.seconds


async def _drain_loop(pool: asyncpg.Pool, table: str, batch: int) -> None:
    claim_sql = CLAIM_SQL.format(table=table)
    complete_sql = COMPLETE_SQL.format(table=table)
    async with pool.acquire() as conn:
        claim = await conn.prepare(claim_sql)
        complete = await conn.prepare(complete_sql)
        while True:
            ids = [row[0] for row in await claim.fetch(batch)]
            if not ids:
                return
            await complete.fetch(ids)


async def drain(dsn: str, table: str, *, loops: int, batch: int) -> DrainResult:
    """Drain ``table`` with ``loops`` concurrent claim-and-complete loops until it is empty."""
    pool = await asyncpg.create_pool(dsn, min_size=loops, max_size=loops)
    try:
        with Stopwatch() as sw:
            await asyncio.gather(*(_drain_loop(pool, table, batch) for _ in range(loops)))
        async with pool.acquire() as conn:
            span = await db_span(conn, table, "done")
    finally:
        await pool.close()
    return DrainResult(span, sw.seconds, loops, batch)


async def fresh_drain_rate(dsn: str, n: int, *, label: str) -> float:
    """Rows/s of ``n`` rows COPYed into a fresh schema, ANALYZEd, then drained by 16 loops
    of 100; the run stops (``SystemExit``) when rows are left undone."""
    async with plain_schema(dsn, label) as schema:
        conn = await asyncpg.connect(dsn)
        try:
            table = await create_table(conn, schema)
            await copy_rows(conn, table, n)
            await conn.execute(f"ANALYZE {table}")
        finally:
            await conn.close()
        drained = await drain(dsn, table, loops=16, batch=100)
    if drained.span.done != n:
        raise SystemExit(f"raw drain finished {drained.span.done} of {n} rows")
    return drained.span.rate
