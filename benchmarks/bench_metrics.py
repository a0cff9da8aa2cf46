"""What recording the worker's metrics costs a job: the per-job calls, and a drain A/B.

    python benchmarks/bench_metrics.py                 # the per-job calls (no database)
    python benchmarks/bench_metrics.py --drain         # and the drain A/B on Postgres
    python benchmarks/bench_metrics.py --drain --jobs 20000 --rounds 5 --driver psycopg

(1) The calls: what the runtime runs per job (``WorkerMetrics.attempt_ended``) and per
    claim (``claimed``), timed on real objects (``timeit``, best of 7 rounds):
    Prometheus only (``TASKQ_OTEL_ENABLED=false``, or no SDK: the same code path), and, for
    information, with an OpenTelemetry SDK ``MeterProvider`` behind it.
(2) ``--drain``: each round, the raw-SQL baseline drain (``baseline.py``: the same N rows
    drained by 16 claim-and-complete loops) and then N no-op jobs drained by one
    ``taskq worker --until-idle`` process in each arm, the arms taking turns:
    - off: the recorder's per-job and per-claim methods replaced with no-ops
      (``unmetered_noop_actors``) and ``TASKQ_OTEL_ENABLED=false``: nothing recorded;
    - on: as shipped, ``TASKQ_OTEL_ENABLED=true`` and no SDK (Prometheus recording);
    - on, SDK (info): an SDK aggregating every instrument (``metered_sdk_noop_actors``).
    Jobs/s from the first ``started_at`` to the last ``finished_at``; the worker process's
    CPU time per job (less disturbed by other load than the rate); medians per arm, and
    each arm's rate as a share of the raw baseline's in the same rounds.

Server: TASKQ_PG_DSN, else TASKQ_TEST_DSN, else postgresql://postgres@127.0.0.1:5432/test.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import timeit

import baseline
import taskq_runs
from bench_support import ArmRuns, alternate_arms, arm_medians, drain_ab_arguments, resolve_dsn

from taskq.app.observability.metrics import WorkerMetrics, new_metrics_registry

ROUNDS = 7
NUMBER = 200_000
ACTORS = {
    "off": "unmetered_noop_actors:registry",
    "on": "noop_actors:registry",
    "sdk": "metered_sdk_noop_actors:registry",
}


def calls() -> dict[str, float]:
    """Nanoseconds per call of each recording call, and of an empty loop body."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    prom = WorkerMetrics(new_metrics_registry(), otel_enabled=False, group="default")
    sdk = WorkerMetrics(
        new_metrics_registry(),
        otel_enabled=True,
        group="default",
        meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]),
    )
    for metrics in (prom, sdk):
        metrics.prepare([("noop", "bench")])

    def without() -> None:
        pass

    results: dict[str, float] = {}
    for name, body in (
        ("empty", without),
        ("attempt_ended", lambda: prom.attempt_ended("noop", "bench", "succeeded", 0.001)),
        ("claimed", lambda: prom.claimed(0.002, 16)),
        (
            "attempt_ended, SDK (info)",
            lambda: sdk.attempt_ended("noop", "bench", "succeeded", 0.001),
        ),
        ("claimed, SDK (info)", lambda: sdk.claimed(0.002, 16)),
    ):
        best = min(timeit.repeat(body, number=NUMBER, repeat=ROUNDS))
        results[name] = best / NUMBER * 1e9
    return results


async def _drain_once(dsn: str, driver: str, n: int, arm: str) -> tuple[float, float]:
    """One drain of ``n`` jobs in ``arm``: jobs/s from the database's timestamps, and the
    worker's CPU microseconds per job."""
    result = await taskq_runs.checked_drain(
        dsn,
        driver,
        n,
        name=arm,
        env={"TASKQ_OTEL_ENABLED": "false" if arm == "off" else "true"},
        actors=ACTORS[arm],
    )
    return result.span.rate, result.cpu_seconds / n * 1e6


async def drain_ab(dsn: str, driver: str, n: int, rounds: int) -> tuple[list[float], ArmRuns]:
    raw: list[float] = []

    async def raw_drain() -> None:
        raw.append(await baseline.fresh_drain_rate(dsn, n, label="raw_metrics"))
        print(f"round {len(raw)}: raw: {raw[-1]:,.0f} rows/s", file=sys.stderr)

    async def drain(arm: str) -> tuple[float, float]:
        return await _drain_once(dsn, driver, n, arm)

    runs = await alternate_arms(list(ACTORS), rounds, drain, before_round=raw_drain)
    return raw, runs


def main() -> None:
    args = drain_ab_arguments(__doc__)

    per_call = calls()
    empty = per_call.pop("empty")
    print(f"Python {sys.version.split()[0]}: the recorder's calls")
    for name, ns in per_call.items():
        print(f"  {name:26} {ns - empty:8.0f} ns  ({ns:.0f} ns with the loop's own {empty:.0f})")

    if args.drain:
        raw, runs = asyncio.run(drain_ab(resolve_dsn(), args.driver, args.jobs, args.rounds))
        raw_rate = statistics.median(raw)
        rate_of, cpu_of = arm_medians(runs)
        print(f"drain, {args.driver}, {args.jobs:,} no-op jobs, C=16, median of {args.rounds}:")
        print(f"  {'raw SQL':15} {raw_rate:9,.0f} rows/s ({', '.join(f'{r:,.0f}' for r in raw)})")
        for arm in runs:
            label = "on, SDK (info)" if arm == "sdk" else arm
            rates = ", ".join(f"{r:,.0f}" for r, _ in runs[arm])
            cpus = ", ".join(f"{c:.1f}" for _, c in runs[arm])
            print(
                f"  {label:15} {rate_of[arm]:9,.0f} jobs/s ({rate_of[arm] / rate_of['off']:6.1%}"
                f" of off, {rate_of[arm] / raw_rate:6.1%} of raw; {rates})"
                f"  {cpu_of[arm]:6.1f} µs CPU/job ({cpu_of[arm] / cpu_of['off']:6.1%} of off;"
                f" {cpus})"
            )


if __name__ == "__main__":
    main()
