"""TaskQ throughput and latency against a raw-SQL baseline, in one run, on one Postgres.

    python benchmarks/bench_throughput.py [--jobs N] [--drivers asyncpg,psycopg]
                                          [--concurrency 16] [--quick] [--markdown]
                                          [--only enqueue] [--rounds 3]

Server: TASKQ_PG_DSN, else TASKQ_TEST_DSN, else postgresql://postgres@127.0.0.1:5432/test.
Every measurement runs in its own fresh schema (TaskQ's migrated with
``migrate_up``), dropped afterwards. What is measured (see docs/benchmarks.md):

(a) drain: N no-op jobs bulk-enqueued, then drained by one ``taskq worker
    --until-idle --max-concurrency C`` process per driver; jobs/s from the first
    started_at to the last finished_at in the database (wall time with startup
    shown too). Then the plan check: the claim query EXPLAINed on that table
    (N finished rows) after ANALYZE, custom and generic plan.
(b) raw baseline: the same N rows COPY-loaded into a minimal table and drained
    by 16 concurrent claim-and-complete loops of 100 rows (--baseline-loops,
    --baseline-batch; never tied to C); single-row prepared INSERTs; COPY itself.
(c) enqueue: ``client.enqueue`` one at a time vs the raw single INSERT, the two
    taking turns 250 calls at a time; the same from 16 callers at once (no target:
    what sharing wake-ups buys); ``client.enqueue_many`` in batches of 1,000
    and 10,000; and, with no client at all, the store's single-enqueue statement
    vs the raw INSERT in pgbench (when installed), also into a copy of jobs with
    only its primary key: the ceiling the schema leaves any client.
(d) enqueue→start latency: jobs enqueued one at a time, 10-20 ms apart, to an
    idle worker (the NOTIFY path); p50/p90/p99 of started_at - created_at.

Every measurement is taken --rounds times (3 by default, 1 with --quick), the
baseline beside TaskQ in each round; rates are medians over the rounds and a
ratio is the median of the rounds' ratios, shown with its range, so one slow
moment of a shared machine does not decide a verdict.

A benchmark, not a test: it prints numbers and verdicts against the product
goals and exits 0 whenever it completed (1 when a run itself broke).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg
import baseline
import report
import server_share
import taskq_runs
from bench_support import DbSpan, plain_schema, resolve_dsn
from report import Row

DRIVERS = ("asyncpg", "psycopg")

# The product goals.
DRAIN_VS_RAW = 0.20
PSYCOPG_VS_ASYNCPG = 0.70
SINGLE_VS_RAW = 0.80
BULK_MIN_RATE = 100_000.0
P99_MAX_MS = 6.0


@dataclass(frozen=True, slots=True)
class Config:
    dsn: str
    jobs: int
    drivers: tuple[str, ...]
    concurrency: int
    single_jobs: int
    latency_jobs: int
    baseline_loops: int
    baseline_batch: int
    markdown: bool
    only_enqueue: bool
    rounds: int


def parse_args(argv: Sequence[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, help="jobs per drain and bulk enqueue (50000)")
    parser.add_argument("--drivers", default=",".join(DRIVERS), help="comma-separated drivers")
    parser.add_argument("--concurrency", type=int, default=16, help="worker max_concurrency")
    parser.add_argument("--quick", action="store_true", help="small sizes (5000 jobs)")
    # The baseline's shape is fixed apart from TaskQ's settings, so a worker setting
    # that slows the raw loops down can never make TaskQ's ratio look better.
    parser.add_argument(
        "--baseline-loops", type=int, default=16, help="concurrent raw drain loops (16)"
    )
    parser.add_argument("--baseline-batch", type=int, default=100, help="rows per raw claim (100)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument(
        "--rounds",
        type=int,
        help="measure everything this many times, baseline beside TaskQ each time, and "
        "report medians (3; --quick: 1)",
    )
    parser.add_argument(
        "--only",
        choices=("enqueue",),
        help="run only these measurements (enqueue: the raw INSERT/COPY and part (c))",
    )
    args = parser.parse_args(argv)
    drivers = tuple(d.strip() for d in args.drivers.split(",") if d.strip())
    unknown = set(drivers) - set(DRIVERS)
    if unknown or not drivers:
        parser.error(f"--drivers takes some of {', '.join(DRIVERS)}")
    jobs = args.jobs if args.jobs is not None else (5_000 if args.quick else 50_000)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    if min(jobs, args.concurrency, args.baseline_loops, args.baseline_batch, rounds) < 1:
        parser.error("--jobs, --concurrency, --rounds and the baseline options must be >= 1")
    return Config(
        dsn=resolve_dsn(),
        jobs=jobs,
        drivers=drivers,
        concurrency=args.concurrency,
        single_jobs=min(jobs, 1_000 if args.quick else 5_000),
        latency_jobs=50 if args.quick else 200,
        baseline_loops=args.baseline_loops,
        baseline_batch=args.baseline_batch,
        markdown=args.markdown,
        only_enqueue=args.only == "enqueue",
        rounds=rounds,
    )


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def describe_server(dsn: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        version = await conn.fetchval("SHOW server_version")
        settings = await conn.fetch(
            "SELECT name, setting, unit FROM pg_settings"
            " WHERE name = ANY($1::text[]) ORDER BY name",
            ["fsync", "synchronous_commit", "shared_buffers", "autovacuum", "max_connections"],
        )
    finally:
        await conn.close()
    shown = ", ".join(f"{r['name']}={r['setting']}{r['unit'] or ''}" for r in settings)
    return f"PostgreSQL {version} ({shown})"


@dataclass(frozen=True, slots=True)
class RawNumbers:
    drain: baseline.DrainResult | None
    copy_rate: float
    insert_rate: float


async def run_baseline(cfg: Config) -> RawNumbers:
    drained: baseline.DrainResult | None = None
    async with plain_schema(cfg.dsn, "raw") as schema:
        conn = await asyncpg.connect(cfg.dsn)
        try:
            table = await baseline.create_table(conn, schema)
            copy_seconds = await baseline.copy_rows(conn, table, cfg.jobs)
            await conn.execute(f"ANALYZE {table}")
        finally:
            await conn.close()
        if not cfg.only_enqueue:
            drained = await baseline.drain(
                cfg.dsn, table, loops=cfg.baseline_loops, batch=cfg.baseline_batch
            )
    if drained is not None and drained.span.done != cfg.jobs:
        raise RuntimeError(f"raw drain finished {drained.span.done} of {cfg.jobs} rows")
    async with plain_schema(cfg.dsn, "raw_insert") as schema:
        conn = await asyncpg.connect(cfg.dsn)
        try:
            table = await baseline.create_table(conn, schema)
            await baseline.single_inserts(conn, table, min(50, cfg.single_jobs))  # warm-up
            insert_seconds = await baseline.single_inserts(conn, table, cfg.single_jobs)
        finally:
            await conn.close()
    return RawNumbers(drained, cfg.jobs / copy_seconds, cfg.single_jobs / insert_seconds)


@dataclass(frozen=True, slots=True)
class Round:
    """Everything one round measured: the baseline and TaskQ, one after the other."""

    raw: RawNumbers
    singles: dict[str, taskq_runs.SingleResult]
    concurrent: dict[str, taskq_runs.ConcurrentResult]
    bulks: dict[tuple[str, int], float]
    drains: dict[str, taskq_runs.DrainResult]
    plans: dict[str, taskq_runs.PlanResult]
    latencies: dict[str, taskq_runs.LatencyResult]
    share: server_share.ServerShare | None


async def measure_round(cfg: Config, number: int) -> Round:
    prefix = f"round {number}/{cfg.rounds}: " if cfg.rounds > 1 else ""
    drain = "" if cfg.only_enqueue else " + drain"
    log(f"{prefix}raw baseline: COPY{drain} of {cfg.jobs} rows, {cfg.single_jobs} single INSERTs")
    raw = await run_baseline(cfg)

    singles: dict[str, taskq_runs.SingleResult] = {}
    concurrent: dict[str, taskq_runs.ConcurrentResult] = {}
    bulks: dict[tuple[str, int], float] = {}
    for driver in cfg.drivers:
        log(
            f"{prefix}{driver}: {cfg.single_jobs} single enqueues, {cfg.jobs} jobs via enqueue_many"
        )
        singles[driver] = await taskq_runs.enqueue_single(cfg.dsn, driver, cfg.single_jobs)
        concurrent[driver] = await taskq_runs.enqueue_concurrent(cfg.dsn, driver, cfg.single_jobs)
        for batch in (1_000, 10_000):
            size = min(batch, cfg.jobs)
            bulks[(driver, size)] = await taskq_runs.enqueue_bulk(cfg.dsn, driver, cfg.jobs, size)
    log(f"{prefix}the single-enqueue statement and the raw INSERT in pgbench")
    share = await server_share.measure(cfg.dsn)

    drains: dict[str, taskq_runs.DrainResult] = {}
    plans: dict[str, taskq_runs.PlanResult] = {}
    latencies: dict[str, taskq_runs.LatencyResult] = {}
    if raw.drain is not None:
        for driver in cfg.drivers:
            log(f"{prefix}{driver}: drain of {cfg.jobs} jobs by one worker, then the plan check")
            drains[driver], plans[driver] = await taskq_runs.drain(
                cfg.dsn, driver, cfg.jobs, cfg.concurrency
            )
            result = drains[driver]
            if result.exit_code != 0 or result.span.done != cfg.jobs:
                raise RuntimeError(
                    f"{driver} worker exited {result.exit_code} with "
                    f"{result.span.done} of {cfg.jobs} jobs succeeded"
                )
        for driver in cfg.drivers:
            log(f"{prefix}{driver}: enqueue→start latency of {cfg.latency_jobs} jobs")
            latencies[driver] = await taskq_runs.latency(cfg.dsn, driver, cfg.latency_jobs)
    return Round(raw, singles, concurrent, bulks, drains, plans, latencies, share)


async def measure(cfg: Config) -> list[Row]:
    """``cfg.rounds`` rounds, one after the other; each row takes the median over rounds."""
    rounds = [await measure_round(cfg, number) for number in range(1, cfg.rounds + 1)]
    median = report.median
    first = rounds[0]
    drain_rows: list[Row] = []
    latency_rows: list[Row] = []
    if first.raw.drain is not None:
        drain_rows, latency_rows = worker_rows(cfg, rounds)
    return [
        *drain_rows,
        Row("(b) raw single-row INSERT", report.rate(median([r.raw.insert_rate for r in rounds]))),
        Row("(b) raw COPY", report.rate(median([r.raw.copy_rate for r in rounds]))),
        *enqueue_rows(rounds),
        *latency_rows,
    ]


def _raw_drain(r: Round) -> baseline.DrainResult:
    assert r.raw.drain is not None  # worker_rows runs only when the baseline drained
    return r.raw.drain


def worker_rows(cfg: Config, rounds: Sequence[Round]) -> tuple[list[Row], list[Row]]:
    """Parts (a) with the raw drain row, and (d) with the plan check."""
    median = report.median
    raw_drain = _raw_drain(rounds[0])
    raw_label = f"{raw_drain.loops} loops x {raw_drain.batch}"
    raw_rates = [_raw_drain(r).span.rate for r in rounds]
    rows: list[Row] = []
    for driver in cfg.drivers:
        label = f"(a) drain, {driver} worker, C={cfg.concurrency}"
        rates = [r.drains[driver].span.rate for r in rounds]
        if driver == "psycopg" and "asyncpg" in cfg.drivers:
            asyncpg_rates = [r.drains["asyncpg"].span.rate for r in rounds]
            goal, base, base_label = PSYCOPG_VS_ASYNCPG, asyncpg_rates, "TaskQ asyncpg"
            target = f">= {PSYCOPG_VS_ASYNCPG:.0%} of asyncpg"
        else:
            goal, base, base_label = DRAIN_VS_RAW, raw_rates, raw_label
            target = f">= {DRAIN_VS_RAW:.0%} of raw"
        rows.append(report.ratio_row(label, rates, base, base_label, goal, target))
        wall = median([r.drains[driver].wall_seconds for r in rounds])
        rows.append(
            Row(
                f"(a) drain wall time incl. worker startup, {driver}",
                f"{wall:.1f} s = {report.rate(cfg.jobs / wall)}",
            )
        )
        rows.append(_fifths_row(f"(a) drain, {driver}", [r.drains[driver].span for r in rounds]))
    raw_wall = median([_raw_drain(r).wall_seconds for r in rounds])
    rows.append(
        Row(
            f"(b) raw drain, {raw_label}",
            f"{report.rate(median(raw_rates))} (wall {raw_wall:.1f} s)",
        )
    )
    rows.append(_fifths_row("(b) raw drain", [_raw_drain(r).span for r in rounds]))
    tail: list[Row] = []
    for driver in cfg.drivers:
        # Every round's samples together: more samples, a steadier p99.
        lat = taskq_runs.LatencyResult(
            driver, tuple(ms for r in rounds for ms in r.latencies[driver].millis)
        )
        tail.append(
            Row(
                f"(d) enqueue→start p50/p90/p99, {driver}",
                f"{lat.p(50):.2f}/{lat.p(90):.2f}/{lat.p(99):.2f} ms",
                target=f"p99 < {P99_MAX_MS:g} ms",
                passed=lat.p(99) < P99_MAX_MS,
            )
        )
    for driver in cfg.drivers:
        plans = [r.plans[driver] for r in rounds]
        ok = all(plan.ok for plan in plans)
        tail.append(
            Row(
                f"plan: claim on {plans[0].finished_rows:,} finished rows ({driver} run)",
                "jobs_dispatch_idx" if ok else "NOT the dispatch index",
                target="partial index, no seq scan",
                passed=ok,
            )
        )
        for plan in plans:
            if not plan.ok:
                plans_text = f"{plan.custom_plan}\n--- generic ---\n{plan.generic_plan}"
                log(f"{driver} claim plans:\n{plans_text}")
    return rows, tail


def _fifths_row(label: str, spans: Sequence[DbSpan]) -> Row:
    """How fast a drain went over its first and its last fifth of the jobs (medians)."""
    first = report.median([s.first_fifth_rate for s in spans])
    last = report.median([s.last_fifth_rate for s in spans])
    return Row(
        f"{label}: first → last fifth of the jobs", f"{report.rate(first)} → {report.rate(last)}"
    )


def enqueue_rows(rounds: Sequence[Round]) -> list[Row]:
    """Part (c) against the raw single INSERT and COPY."""
    median = report.median
    rows: list[Row] = []
    for driver in rounds[0].singles:
        rows.append(
            report.ratio_row(
                f"(c) enqueue() one by one, {driver}",
                [r.singles[driver].rate for r in rounds],
                [r.singles[driver].raw_rate for r in rounds],
                "single INSERT, in turns",
                SINGLE_VS_RAW,
                f">= {SINGLE_VS_RAW:.0%} of raw",
            )
        )
    for driver in rounds[0].concurrent:
        # No target: shows what sharing wake-ups buys when callers enqueue at once.
        rows.append(
            report.ratio_row(
                f"(c) enqueue() from {taskq_runs.CONCURRENT_CALLERS} callers at once, {driver}",
                [r.concurrent[driver].rate for r in rounds],
                [r.concurrent[driver].raw_rate for r in rounds],
                "the same with raw INSERTs, in turns",
                None,
            )
        )
    singles = [single for r in rounds for single in r.singles.values()]
    if singles:
        # The baseline's own price of a wake-up per statement (TaskQ's must pay it too).
        rows.append(
            report.ratio_row(
                "(b) raw single-row INSERT with a pg_notify",
                [single.notify_rate for single in singles],
                [single.raw_rate for single in singles],
                "single INSERT, in turns",
                None,
            )
        )
        # What the server's share allows: the same statement with no client work.
        rows.append(
            report.ratio_row(
                "(c) its INSERT alone, prepared, no client",
                [single.statement_rate for single in singles],
                [single.raw_rate for single in singles],
                "single INSERT, in turns",
                None,
            )
        )
    shares = [r.share for r in rounds if r.share is not None]
    if shares:
        # No client at all (pgbench): the ceiling the schema leaves any client.
        rows.append(
            report.ratio_row(
                "(c) its INSERT alone, server only (pgbench)",
                [share.statement_rate for share in shares],
                [share.raw_rate for share in shares],
                "raw INSERT in pgbench, in turns",
                None,
            )
        )
        rows.append(
            report.ratio_row(
                "(c) the same into a copy of jobs with only its primary key (pgbench)",
                [share.pkey_only_rate for share in shares],
                [share.raw_rate for share in shares],
                "raw INSERT in pgbench, in turns",
                None,
            )
        )
    for driver, batch in rounds[0].bulks:
        value = median([r.bulks[(driver, batch)] for r in rounds])
        ratio = median([r.bulks[(driver, batch)] / r.raw.copy_rate for r in rounds])
        rows.append(
            Row(
                f"(c) enqueue_many(), {batch:,} per call, {driver}",
                report.rate(value),
                f"{report.rate(median([r.raw.copy_rate for r in rounds]))} (COPY)",
                report.pct(ratio),
                f">= {BULK_MIN_RATE:,.0f}/s",
                passed=value >= BULK_MIN_RATE,
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    server = asyncio.run(describe_server(cfg.dsn))
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    try:
        rows = asyncio.run(measure(cfg))
    except (RuntimeError, TimeoutError, OSError, asyncpg.PostgresError) as exc:
        log(f"benchmark run failed: {exc}")
        return 1
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"TaskQ throughput benchmark — {started}")
    print(
        f"{server}; Python {platform.python_version()}; {os.cpu_count()} CPUs;"
        f" load average after run {load}"
    )
    print(
        f"jobs={cfg.jobs:,} concurrency={cfg.concurrency} single={cfg.single_jobs:,}"
        f" latency_jobs={cfg.latency_jobs} drivers={','.join(cfg.drivers)} rounds={cfg.rounds}"
    )
    print()
    print(report.as_markdown(rows) if cfg.markdown else report.as_text(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
