"""What the health socket costs a drain: the worker with it off, and on while scraped.

    python benchmarks/bench_health.py                      # 20,000 jobs, 3 rounds, asyncpg
    python benchmarks/bench_health.py --jobs 50000 --rounds 5 --driver psycopg
    python benchmarks/bench_health.py --serving           # only (2): CPU per request

(1) The drain A/B.
Each round drains N bulk-enqueued no-op jobs with one ``taskq worker --until-idle
--max-concurrency 16`` process twice: once with ``TASKQ_HEALTH_ENABLED=false``
("off") and once with it on ("on") while this process asks the socket for
``/ready`` and then ``/metrics`` every ``--scrape-every`` seconds (0.1 by default:
far more often than a probe or Prometheus would), so the cost of *serving* is in
the number, not only that of a server thread that idles. The two take turns
(off first in odd rounds, on first in even ones), and each round also drains the
same N rows with the raw-SQL baseline (16 claim-and-complete loops of 100 rows),
so each TaskQ rate is read against a baseline measured minutes apart on the same
machine.

Reported per mode: jobs/s (first ``started_at`` to last ``finished_at``, from the
database, as bench_throughput's drain), the ratio to that round's raw baseline,
the worker's CPU microseconds per job (user + system, start-up included, and net
of the CPU a worker of the same mode spends starting and stopping with nothing
to do, measured just before), and for "on" how many scrapes were answered.
The verdict: the median of the rounds' on/off ratios must be at least 95%.

(2) What serving costs, without the drain's noise: one idle worker (health on,
no jobs) whose process CPU time (``/proc/<pid>/stat``) is read over windows of
``--window`` seconds, alternately left alone and scraped (``/ready`` and
``/metrics`` every ``--scrape-every`` seconds): the difference, per request and
as a share of one core, is what answering costs the worker.

A benchmark, not a test: it prints numbers and exits 0 whenever it completed.
Server: TASKQ_PG_DSN, else TASKQ_TEST_DSN, else postgresql://postgres@127.0.0.1:5432/test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from typing import Final

import baseline
import taskq_runs
from bench_support import resolve_dsn, taskq_schema

from taskq.app.cli.health_probe import get

#: The on/off ratio the health socket must keep (issue 18).
ON_VS_OFF: Final = 0.95


@dataclass(slots=True)
class Scrapes:
    answered: int = 0
    failed: int = 0
    #: /ready answers that were 503 (a ping that missed its timeout, most likely).
    not_ready: int = 0


@dataclass(frozen=True, slots=True)
class Drain:
    rate: float
    cpu_us_per_job: float
    #: The same, less the CPU of a worker that started and stopped with nothing to do.
    net_cpu_us_per_job: float
    scrapes: Scrapes | None = None


async def _scrape(socket_path: str, every: float, scrapes: Scrapes) -> None:
    """GET /ready then /metrics every ``every`` seconds until cancelled."""
    while True:
        await asyncio.sleep(every)
        for path in ("/ready", "/metrics"):
            try:
                status, _ = await asyncio.to_thread(get, socket_path, path)
            except OSError:
                scrapes.failed += 1  # not serving yet, or already gone
                continue
            scrapes.answered += 1
            if path == "/ready" and status == 503:
                scrapes.not_ready += 1


def _health_env(health: bool, socket_path: str) -> dict[str, str]:
    return {
        "TASKQ_HEALTH_ENABLED": "true" if health else "false",
        "TASKQ_HEALTH_SOCKET_PATH": socket_path,
    }


async def startup_cpu(dsn: str, driver: str, *, health: bool) -> float:
    """CPU seconds of a worker that starts, finds nothing to do and stops (until-idle):
    the fixed cost in each drain's CPU, which the per-job figure should not carry."""
    socket_dir = tempfile.mkdtemp(prefix="tqb", dir="/tmp")
    try:
        env = _health_env(health, os.path.join(socket_dir, "w.sock"))
        idle = await taskq_runs.checked_drain(dsn, driver, 0, name="health idle", env=env)
        return idle.cpu_seconds
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


async def drain_taskq(dsn: str, driver: str, n: int, *, health: bool, every: float) -> Drain:
    mode = "on" if health else "off"
    fixed = await startup_cpu(dsn, driver, health=health)
    socket_dir = tempfile.mkdtemp(prefix="tqb", dir="/tmp")
    socket_path = os.path.join(socket_dir, "w.sock")
    scrapes = Scrapes() if health else None

    async def scrape() -> None:
        assert scrapes is not None
        await _scrape(socket_path, every, scrapes)

    try:
        result = await taskq_runs.checked_drain(
            dsn,
            driver,
            n,
            name=f"health {mode}",
            env=_health_env(health, socket_path),
            alongside=scrape if scrapes is not None else None,
        )
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
    cpu = result.cpu_seconds
    return Drain(result.span.rate, cpu / n * 1e6, (cpu - fixed) / n * 1e6, scrapes)


async def run(dsn: str, driver: str, n: int, rounds: int, every: float) -> None:
    raw: list[float] = []
    runs: dict[str, list[Drain]] = {"off": [], "on": []}
    for round_no in range(rounds):
        raw.append(await baseline.fresh_drain_rate(dsn, n, label="health_raw"))
        order = ("off", "on") if round_no % 2 == 0 else ("on", "off")
        for mode in order:
            result = await drain_taskq(dsn, driver, n, health=mode == "on", every=every)
            runs[mode].append(result)
            scraped = (
                f", {result.scrapes.answered} scrapes answered ({result.scrapes.failed} not; "
                f"/ready 503: {result.scrapes.not_ready})"
                if result.scrapes is not None
                else ""
            )
            print(
                f"round {round_no + 1}: raw {raw[-1]:,.0f} rows/s; health {mode}: "
                f"{result.rate:,.0f} jobs/s, {result.cpu_us_per_job:.1f} µs CPU/job "
                f"({result.net_cpu_us_per_job:.1f} net of start-up){scraped}",
                file=sys.stderr,
                flush=True,
            )

    on_off = [on.rate / off.rate for on, off in zip(runs["on"], runs["off"], strict=True)]
    print(
        f"drain, {driver}, {n:,} no-op jobs, C=16, {rounds} rounds, "
        f"on = scraped (/ready + /metrics) every {every:g}s; medians:"
    )
    print(f"  raw baseline   {statistics.median(raw):9,.0f} rows/s")
    for mode, results in runs.items():
        rates = [r.rate for r in results]
        vs_raw = [r.rate / b for r, b in zip(results, raw, strict=True)]
        print(
            f"  health {mode:4}    {statistics.median(rates):9,.0f} jobs/s "
            f"({statistics.median(vs_raw):6.1%} of raw; {', '.join(f'{r:,.0f}' for r in rates)})"
            f"  {statistics.median(r.cpu_us_per_job for r in results):6.1f} µs CPU/job"
            f" ({statistics.median(r.net_cpu_us_per_job for r in results):5.1f} net of start-up)"
        )
    ratio = statistics.median(on_off)
    verdict = "ok" if ratio >= ON_VS_OFF else "BELOW TARGET"
    print(
        f"  on/off: {ratio:.1%} (rounds: {', '.join(f'{r:.1%}' for r in on_off)}); "
        f"target >= {ON_VS_OFF:.0%}: {verdict}"
    )


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def serving(dsn: str, driver: str, window: float, windows: int, every: float) -> None:
    socket_dir = tempfile.mkdtemp(prefix="tqb", dir="/tmp")
    socket_path = os.path.join(socket_dir, "w.sock")
    idle: list[float] = []
    scraped: list[float] = []
    per_request: list[float] = []
    try:
        async with taskq_schema(dsn, "health_serving") as schema:
            env = taskq_runs.worker_env(dsn, schema, driver)
            env["TASKQ_HEALTH_ENABLED"] = "true"
            env["TASKQ_HEALTH_SOCKET_PATH"] = socket_path
            proc = await taskq_runs._spawn(env, taskq_runs.worker_command(16, until_idle=False))
            try:
                for _ in range(600):
                    try:
                        if (await asyncio.to_thread(get, socket_path, "/ready"))[0] == 200:
                            break
                    except OSError:
                        pass
                    await asyncio.sleep(0.1)
                else:
                    raise SystemExit("the worker never became ready")
                await asyncio.sleep(2.0)  # past the start-up's leader election and first sweeps
                for _ in range(windows):
                    before = _process_cpu(proc.pid)
                    await asyncio.sleep(window)
                    idle.append((_process_cpu(proc.pid) - before) / window)
                    scrapes = Scrapes()
                    before = _process_cpu(proc.pid)
                    scraper = asyncio.create_task(_scrape(socket_path, every, scrapes))
                    await asyncio.sleep(window)
                    scraper.cancel()
                    await asyncio.gather(scraper, return_exceptions=True)
                    cpu = _process_cpu(proc.pid) - before
                    scraped.append(cpu / window)
                    per_request.append((cpu - idle[-1] * window) / max(1, scrapes.answered))
            finally:
                await taskq_runs._stop(proc)
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
    rate = 2 / every
    extra = statistics.median(s - i for s, i in zip(scraped, idle, strict=True))
    print(
        f"serving, {driver}: an idle worker, {windows} windows of {window:g}s each way, "
        f"/ready + /metrics every {every:g}s ({rate:g} requests/s); medians:"
    )
    print(f"  idle           {statistics.median(idle) * 1000:6.1f} ms CPU/s")
    print(f"  scraped        {statistics.median(scraped) * 1000:6.1f} ms CPU/s")
    print(
        f"  serving costs  {extra * 1000:6.1f} ms CPU/s ({extra:.2%} of one core), "
        f"{statistics.median(per_request) * 1e6:.0f} µs CPU per request"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--driver", default="asyncpg", choices=("asyncpg", "psycopg"))
    parser.add_argument("--scrape-every", type=float, default=0.1, help="seconds (0.1)")
    parser.add_argument("--serving", action="store_true", help="only (2): CPU per request")
    parser.add_argument("--window", type=float, default=5.0, help="(2): seconds per window")
    args = parser.parse_args()
    if min(args.jobs, args.rounds) < 1 or args.scrape_every <= 0 or args.window <= 0:
        parser.error("--jobs and --rounds must be >= 1, --scrape-every and --window > 0")
    dsn = resolve_dsn()
    if not args.serving:
        asyncio.run(run(dsn, args.driver, args.jobs, args.rounds, args.scrape_every))
    asyncio.run(serving(dsn, args.driver, args.window, args.rounds, args.scrape_every))


if __name__ == "__main__":
    main()
