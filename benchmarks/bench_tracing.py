"""What OpenTelemetry tracing costs a job, when it is off and when no SDK is configured.

    python benchmarks/bench_tracing.py                 # the per-job hooks (no database)
    python benchmarks/bench_tracing.py --drain         # and the drain A/B on Postgres
    python benchmarks/bench_tracing.py --drain --jobs 20000 --rounds 5 --driver psycopg

(1) The hooks: what a consumer runs per job for its span, timed on real objects
    (``timeit``, best of 7 rounds of 1,000,000):
    - off (``TASKQ_OTEL_ENABLED=false``): the consumer's three ``is not None`` tests;
    - on, no SDK: ``Tracing.tracer()`` (a monotonic-clock read while no SDK is found)
      plus the same tests;
    - on, with the SDK (info only: the application's choice): ``attempt_span.start``,
      ``task_context`` and ``end`` into a ``TracerProvider`` with no span processor.
(2) ``--drain``: N no-op jobs bulk-enqueued, drained by one ``taskq worker --until-idle``
    process, once with ``TASKQ_OTEL_ENABLED=false`` and once with ``true`` and no SDK
    (and, for information, with an SDK batching spans to an exporter that drops them),
    the modes taking turns for ``--rounds`` rounds; jobs/s from the first ``started_at``
    to the last ``finished_at`` (as bench_throughput's drain), and the worker process's
    CPU time per job (user + system, start-up included: the same in both compared modes),
    which other load on the machine disturbs far less than the rate; medians per mode.

Server: TASKQ_PG_DSN, else TASKQ_TEST_DSN, else postgresql://postgres@127.0.0.1:5432/test.
"""

from __future__ import annotations

import asyncio
import sys
import timeit
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import taskq_runs
from bench_support import ArmRuns, alternate_arms, arm_medians, drain_ab_arguments, resolve_dsn
from opentelemetry import trace

from taskq.app.observability.tracing import Tracing
from taskq.app.worker import attempt_span
from taskq.app.worker.state import ActiveJob
from taskq.domain.job import ClaimedJob
from taskq.domain.outcomes import Complete, Succeeded

NUMBER = 1_000_000
ROUNDS = 7
#: An actors module that configures an SDK (BatchSpanProcessor, spans dropped) and
#: registers the no-op actor: the "SDK" mode of the drain.
TRACED_ACTORS = "traced_noop_actors:registry"


def _job() -> ClaimedJob:
    now = datetime.now(UTC)
    return ClaimedJob(
        id=1,
        queue="bench",
        actor="noop",
        payload={"n": 1},
        priority=0,
        attempt=1,
        max_attempts=3,
        fencing_token=1,
        scheduled_at=now,
        lock_expires_at=now + timedelta(seconds=60),
        schedule_to_close=None,
        fairness_key=None,
        metadata={},
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
    )


def hooks() -> dict[str, float]:
    """Nanoseconds per job of each mode's hooks, and of an empty loop body."""
    from opentelemetry.sdk.trace import TracerProvider

    job = _job()
    active = ActiveJob(job, cast(Any, None))
    off: Tracing | None = None
    no_sdk = Tracing(trace.ProxyTracerProvider())  # what the API gives with no SDK set
    sdk_tracer = TracerProvider().get_tracer("bench")
    outcome, decision = Succeeded(None), Complete(None)

    def without() -> None:
        pass

    def tracing_off() -> None:
        # Dispatcher._run, _invoke_in_task, _conclude: exactly these tests.
        if off is not None:
            raise AssertionError
        _ = None if active.span is None else active.span
        if active.span is not None:
            raise AssertionError

    def tracing_on_no_sdk() -> None:
        tracing = no_sdk
        if tracing is not None:
            tracer = tracing.tracer()
            if tracer is not None:
                raise AssertionError("an SDK was found")
        _ = None if active.span is None else active.span
        if active.span is not None:
            raise AssertionError

    def tracing_on_sdk() -> None:
        span = attempt_span.start(sdk_tracer, job, worker_id="w", group="default")
        attempt_span.task_context(span)
        attempt_span.end(span, outcome, decision)

    results: dict[str, float] = {}
    for name, body, number in (
        ("empty", without, NUMBER),
        ("off", tracing_off, NUMBER),
        ("on, no SDK", tracing_on_no_sdk, NUMBER),
        ("on, SDK (info)", tracing_on_sdk, NUMBER // 20),
    ):
        best = min(timeit.repeat(body, number=number, repeat=ROUNDS))
        results[name] = best / number * 1e9
    return results


async def _drain_once(dsn: str, driver: str, n: int, mode: str) -> tuple[float, float]:
    """One drain of ``n`` jobs in ``mode``: jobs/s from the database's timestamps, and the
    worker's CPU microseconds per job."""
    result = await taskq_runs.checked_drain(
        dsn,
        driver,
        n,
        name=mode,
        env={"TASKQ_OTEL_ENABLED": "false" if mode == "off" else "true"},
        actors=TRACED_ACTORS if mode == "sdk" else taskq_runs.NOOP_ACTORS,
    )
    return result.span.rate, result.cpu_seconds / n * 1e6


async def drain_ab(dsn: str, driver: str, n: int, rounds: int) -> ArmRuns:
    async def drain(mode: str) -> tuple[float, float]:
        return await _drain_once(dsn, driver, n, "no_sdk" if mode == "on, no SDK" else mode)

    return await alternate_arms(["off", "on, no SDK", "sdk"], rounds, drain)


def main() -> None:
    args = drain_ab_arguments(__doc__)

    per_job = hooks()
    empty = per_job.pop("empty")
    print(f"Python {sys.version.split()[0]}: the consumer's tracing hooks, per job")
    for name, ns in per_job.items():
        print(f"  {name:15} {ns - empty:8.0f} ns  ({ns:.0f} ns with the loop's own {empty:.0f})")

    if args.drain:
        runs = asyncio.run(drain_ab(resolve_dsn(), args.driver, args.jobs, args.rounds))
        rate_of, cpu_of = arm_medians(runs)
        print(f"drain, {args.driver}, {args.jobs:,} no-op jobs, C=16, median of {args.rounds}:")
        for mode in runs:
            label = "on, SDK (info)" if mode == "sdk" else mode
            rates = ", ".join(f"{r:,.0f}" for r, _ in runs[mode])
            cpus = ", ".join(f"{c:.1f}" for _, c in runs[mode])
            print(
                f"  {label:15} {rate_of[mode]:9,.0f} jobs/s ({rate_of[mode] / rate_of['off']:6.1%}"
                f" of off; {rates})  {cpu_of[mode]:6.1f} µs CPU/job"
                f" ({cpu_of[mode] / cpu_of['off']:6.1%} of off; {cpus})"
            )


if __name__ == "__main__":
    main()
