"""What every benchmark part shares: the server, a fresh schema per measurement, statistics.

Each measurement runs in its own schema, created (TaskQ's through
``migrate_up``, the raw baseline's by hand) and dropped afterwards, so no
measurement sees another's rows, dead tuples or statistics.
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import asyncpg

from taskq.app.composition import migrate_up

DEFAULT_DSN: Final = "postgresql://postgres@127.0.0.1:5432/test"


def resolve_dsn() -> str:
    """The server to measure: TASKQ_PG_DSN, else TASKQ_TEST_DSN, else the local default."""
    return os.environ.get("TASKQ_PG_DSN") or os.environ.get("TASKQ_TEST_DSN") or DEFAULT_DSN


def schema_name(label: str) -> str:
    """A fresh, valid schema name for one measurement (random, so parallel runs never meet)."""
    return f"bench_{label}_{secrets.token_hex(4)}"


async def drop_schema(dsn: str, name: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        await conn.close()


@asynccontextmanager
async def taskq_schema(dsn: str, label: str) -> AsyncIterator[str]:
    """A new schema migrated with ``migrate_up`` (the path operators use); dropped at exit."""
    name = schema_name(label)
    await migrate_up(dsn=dsn, schema_name=name)
    try:
        yield name
    finally:
        await drop_schema(dsn, name)


@asynccontextmanager
async def plain_schema(dsn: str, label: str) -> AsyncIterator[str]:
    """A new empty schema for the raw baseline; dropped at exit."""
    name = schema_name(label)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'CREATE SCHEMA "{name}"')
    finally:
        await conn.close()
    try:
        yield name
    finally:
        await drop_schema(dsn, name)


#: Each arm of a drain A/B and its rounds: (jobs/s, the worker's CPU µs per job) each.
ArmRuns = dict[str, list[tuple[float, float]]]


def drain_ab_arguments(doc: str) -> argparse.Namespace:
    """The options of a script that times calls and, with ``--drain``, runs a drain A/B."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--drain", action="store_true")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--driver", default="asyncpg", choices=("asyncpg", "psycopg"))
    return parser.parse_args()


async def alternate_arms(
    arms: Sequence[str],
    rounds: int,
    drain: Callable[[str], Awaitable[tuple[float, float]]],
    before_round: Callable[[], Awaitable[None]] | None = None,
) -> ArmRuns:
    """``rounds`` rounds of one ``drain`` per arm, in turn forwards and backwards so no arm
    always runs first; each drain's figures go to stderr as it ends."""
    runs: ArmRuns = {arm: [] for arm in arms}
    for round_no in range(rounds):
        if before_round is not None:
            await before_round()
        for arm in arms if round_no % 2 == 0 else list(reversed(arms)):
            rate, cpu = await drain(arm)
            runs[arm].append((rate, cpu))
            print(
                f"round {round_no + 1}: {arm}: {rate:,.0f} jobs/s, {cpu:.1f} µs CPU/job",
                file=sys.stderr,
            )
    return runs


def arm_medians(runs: ArmRuns) -> tuple[dict[str, float], dict[str, float]]:
    """Each arm's median jobs/s and median CPU µs per job."""
    rate_of = {arm: statistics.median(r for r, _ in values) for arm, values in runs.items()}
    cpu_of = {arm: statistics.median(c for _, c in values) for arm, values in runs.items()}
    return rate_of, cpu_of


def children_cpu() -> float:
    """User + system CPU seconds of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Stopwatch:
    """Wall time of a block on the monotonic clock: ``with Stopwatch() as sw: ...; sw.seconds``."""

    def __init__(self) -> None:
        self.started = 0.0
        self.seconds = 0.0

    def __enter__(self) -> Stopwatch:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started


@dataclass(frozen=True, slots=True)
class DbSpan:
    """What the database recorded for a drained table: rows done, first start, last finish."""

    done: int
    total: int
    first_started: datetime | None
    last_finished: datetime | None
    #: Rows/s over the first and the last fifth of the rows done, by finish time: a drain
    #: that slows down as it goes (dead index entries piling up) shows it here.
    first_fifth_rate: float = float("nan")
    last_fifth_rate: float = float("nan")

    @property
    def seconds(self) -> float:
        if self.first_started is None or self.last_finished is None:
            return float("nan")
        return (self.last_finished - self.first_started).total_seconds()

    @property
    def rate(self) -> float:
        seconds = self.seconds
        return self.done / seconds if seconds > 0 else float("nan")


async def db_span(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, table: str, done_status: str
) -> DbSpan:
    """Read a drained table's span; ``table`` is a trusted, already-quoted name."""
    row = await conn.fetchrow(
        f"SELECT count(*) FILTER (WHERE status = $1) AS done, count(*) AS total,"
        f" min(started_at) AS first_started, max(finished_at) AS last_finished FROM {table}",
        done_status,
    )
    assert row is not None
    finished = [
        r["finished_at"]
        for r in await conn.fetch(
            f"SELECT finished_at FROM {table} WHERE status = $1 ORDER BY finished_at",
            done_status,
        )
    ]
    first, last = _fifth_rates(finished)
    return DbSpan(
        row["done"], row["total"], row["first_started"], row["last_finished"], first, last
    )


def _fifth_rates(finished: Sequence[datetime]) -> tuple[float, float]:
    """Rows/s of the first and of the last fifth of ``finished`` (sorted finish times)."""
    fifth = len(finished) // 5
    if fifth < 2:
        return float("nan"), float("nan")

    def rate(start: datetime, end: datetime) -> float:
        seconds = (end - start).total_seconds()
        return (fifth - 1) / seconds if seconds > 0 else float("nan")

    return rate(finished[0], finished[fifth - 1]), rate(finished[-fifth], finished[-1])


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0..100) by linear interpolation between closest ranks."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
