"""The server's share of a single enqueue, measured with no Python at all (pgbench).

The single-enqueue target compares ``client.enqueue`` with the raw baseline's
INSERT. This part takes every client out of that comparison: pgbench (C,
libpq, prepared statements, one connection, autocommit) runs, in turns:

- the raw baseline's INSERT into its minimal table;
- the store's own single-enqueue statement (``insert_job_bare``, its max_pending
  gate and wake-up included) into a TaskQ schema's ``jobs`` table;
- that same statement into a copy of ``jobs`` that has only its primary key,
  which shows what the table's other indexes cost each insert.

If the second ratio is already near or below the target, no client on top of
it can reach the target: what is left is the schema's work, not the client's.
Skipped (None) when pgbench is not installed.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import asyncpg
import baseline
import noop_actors
from bench_support import plain_schema, taskq_schema

from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import numbered_queries

#: Seconds per pgbench run, and runs of each statement (taking turns).
SECONDS: Final = 2
TURNS: Final = 2

_TPS = re.compile(r"^tps = ([0-9.]+)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ServerShare:
    """Statements per second of each statement, pgbench on one connection."""

    raw_rate: float
    statement_rate: float
    pkey_only_rate: float


def _pgbench_script(sql: str, params: tuple[str, ...]) -> str:
    """``sql`` with its ``$n`` placeholders as pgbench variables (bound, when
    prepared, as parameters, the way a driver binds them)."""
    return re.sub(r"\$(\d+)", lambda m: f":{params[int(m.group(1)) - 1]}", sql) + ";\n"


async def _pgbench(dsn: str, script: Path, variables: dict[str, str]) -> float:
    defines = [arg for name, value in variables.items() for arg in ("-D", f"{name}={value}")]
    proc = await asyncio.create_subprocess_exec(
        "pgbench",
        "-n",
        "-M",
        "prepared",
        "-c",
        "1",
        "-T",
        str(SECONDS),
        *defines,
        "-f",
        str(script),
        dsn,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    found = _TPS.search(out.decode())
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"pgbench failed ({proc.returncode}): {err.decode().strip()[-500:]}")
    return float(found.group(1))


async def measure(dsn: str) -> ServerShare | None:
    """Means over ``TURNS`` turns of each statement; None without pgbench."""
    if shutil.which("pgbench") is None:
        return None
    async with (
        taskq_schema(dsn, "share") as schema,
        plain_schema(dsn, "share_raw") as raw_schema,
    ):
        conn = await asyncpg.connect(dsn)
        try:
            table = await baseline.create_table(conn, raw_schema)
            names = Schema(schema)
            await conn.execute(
                f"CREATE TABLE {names.quoted}.jobs_pkey_only (LIKE {names.quoted}.jobs"
                " INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS);"
                f" ALTER TABLE {names.quoted}.jobs_pkey_only ADD PRIMARY KEY (id)"
            )
        finally:
            await conn.close()
        query = numbered_queries("enqueue", names)["insert_job_bare"]
        statement = _pgbench_script(query.sql, query.params)
        pkey_only = statement.replace(f"{names.quoted}.jobs ", f"{names.quoted}.jobs_pkey_only ", 1)
        variables = {
            "queue": noop_actors.QUEUE,
            "actor": noop_actors.noop.name,
            "payload": '{"n":1}',
            "priority": "0",
            "max_attempts": "3",
            "channel": names.wake_channel,
        }
        raw_sql = baseline.INSERT_SQL.format(table=table).replace("$1", ":payload") + ";\n"
        with tempfile.TemporaryDirectory() as tmp:
            scripts = {}
            for label, text in (("raw", raw_sql), ("ours", statement), ("pkey", pkey_only)):
                scripts[label] = Path(tmp, f"{label}.sql")
                scripts[label].write_text(text)
            totals = dict.fromkeys(scripts, 0.0)
            for _ in range(TURNS):
                for label, script in scripts.items():
                    totals[label] += await _pgbench(dsn, script, variables)
    return ServerShare(totals["raw"] / TURNS, totals["ours"] / TURNS, totals["pkey"] / TURNS)
