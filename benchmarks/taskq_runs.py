"""TaskQ measured through the paths its users take.

Enqueues go through ``JobsClient.connect`` (``enqueue`` / ``enqueue_many``);
jobs are drained by a real ``taskq worker`` process started as an operator
would start it; the database says when each job started and finished.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import asyncpg
import baseline
import noop_actors
from bench_support import (
    DbSpan,
    Stopwatch,
    children_cpu,
    db_span,
    percentile,
    plain_schema,
    taskq_schema,
)

from taskq import JobsClient
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import numbered_queries
from taskq.adapters.postgres.store.finish import WRITE_PARAMS

HERE: Final = Path(__file__).resolve().parent
ENQUEUE_BATCH: Final = 10_000
#: Longest a worker may take to start, drain, or stop before the run is declared failed.
WORKER_TIMEOUT: Final = 600.0
#: The actors module every worker loads unless a run names another.
NOOP_ACTORS: Final = "noop_actors:registry"
#: Most warm-up jobs a latency run sends before giving up on a working NOTIFY path.
WARM_UP_MAX: Final = 100
_JOBS_SEQ_SCAN: Final = re.compile(r"Seq Scan on jobs\b")


@dataclass(frozen=True, slots=True)
class DrainResult:
    driver: str
    span: DbSpan
    wall_seconds: float
    exit_code: int
    #: User + system CPU seconds of the worker process, start-up and shutdown included.
    cpu_seconds: float


@dataclass(frozen=True, slots=True)
class LatencyResult:
    driver: str
    millis: tuple[float, ...]

    def p(self, pct: float) -> float:
        return percentile(self.millis, pct)


@dataclass(frozen=True, slots=True)
class PlanResult:
    """The claim query's plans on a table holding many finished rows."""

    finished_rows: int
    custom_plan: str
    generic_plan: str
    #: The heartbeat's custom and generic plans: a worker's running jobs by jobs_running_idx.
    heartbeat_plans: tuple[str, ...] = ()

    @staticmethod
    def _uses_index(plan: str, index: str = "jobs_dispatch_idx") -> bool:
        return index in plan and not _JOBS_SEQ_SCAN.search(plan)

    @property
    def ok(self) -> bool:
        return (
            self._uses_index(self.custom_plan)
            and self._uses_index(self.generic_plan)
            and all(self._uses_index(p, "jobs_running_idx") for p in self.heartbeat_plans)
        )


def _payloads(start: int, count: int) -> list[dict[str, int]]:
    return [{"n": i} for i in range(start, start + count)]


def worker_env(dsn: str, schema: str, driver: str) -> dict[str, str]:
    """The worker's environment: ours without any TASKQ_* variable, plus the run's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASKQ_")}
    path = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    return {
        **env,
        "PYTHONPATH": path,
        "TASKQ_PG_DSN": dsn,
        "TASKQ_SCHEMA_NAME": schema,
        "TASKQ_DRIVER": driver,
        "TASKQ_QUEUES": noop_actors.QUEUE,
        "TASKQ_IDLE_SETTLE_WINDOW": "0",
        "TASKQ_LOG_LEVEL": "WARNING",
        "TASKQ_HEALTH_ENABLED": "false",
    }


def worker_command(concurrency: int, *, until_idle: bool, actors: str = NOOP_ACTORS) -> list[str]:
    """``taskq worker`` as installed beside this interpreter (else ``python -m``)."""
    script = Path(sys.executable).parent / "taskq"
    base = [str(script)] if script.exists() else [sys.executable, "-m", "taskq.app.cli"]
    args = [
        "worker",
        "--actors",
        actors,
        "--max-concurrency",
        str(concurrency),
    ]
    return base + args + (["--until-idle"] if until_idle else [])


async def _spawn(env: Mapping[str, str], args: list[str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *args, env=dict(env), stdin=asyncio.subprocess.DEVNULL
    )


# -- enqueue -------------------------------------------------------------------------------


#: Calls per turn when the single enqueue and the raw INSERT take turns.
SINGLE_CHUNK: Final = 250


@dataclass(frozen=True, slots=True)
class SingleResult:
    """``client.enqueue`` one at a time, and the raw single INSERT measured in turns with it.

    ``notify_rate``: the raw INSERT with a ``pg_notify`` in its ``RETURNING``, in the
    same turns: what a wake-up per enqueue statement costs the baseline itself.
    ``statement_rate``: the store's own INSERT (``insert_job_bare``) prepared on
    the raw INSERT's bare connection, in the same turns: the server's share of a
    single enqueue, with no client work but the baseline's.
    """

    rate: float
    raw_rate: float
    statement_rate: float
    notify_rate: float


async def enqueue_single(dsn: str, driver: str, n: int) -> SingleResult:
    """jobs/s of ``n`` ``client.enqueue`` calls, and of ``n`` raw single-row INSERTs.

    The two take turns, ``SINGLE_CHUNK`` calls at a time (after a short
    warm-up of each), so a machine that speeds up or slows down during the
    run weighs on both alike: the ratio compares like with like.
    """
    async with (
        taskq_schema(dsn, "enq1") as schema,
        plain_schema(dsn, "enq1_raw") as raw_schema,
        JobsClient.connect(dsn, driver=driver, schema=schema) as client,
    ):
        conn = await asyncpg.connect(dsn)
        try:
            table = await baseline.create_table(conn, raw_schema)
            statement = await _bare_insert(conn, schema)
            await baseline.single_inserts(conn, table, min(50, n))
            await statement(min(50, n))
            for i in range(min(50, n)):
                await client.enqueue(noop_actors.noop, {"n": -i})
            notifying = await conn.prepare(
                baseline.INSERT_SQL.format(table=table) + " RETURNING pg_notify('bench_wake', '')"
            )
            ours = raw = alone = woken = 0.0
            for start in range(0, n, SINGLE_CHUNK):
                count = min(SINGLE_CHUNK, n - start)
                raw += await baseline.single_inserts(conn, table, count)
                alone += await statement(count)
                with Stopwatch() as sw:
                    for i in range(start, start + count):
                        await notifying.fetchrow(f'{{"n":{i}}}')
                woken += sw.seconds
                with Stopwatch() as sw:
                    for i in range(start, start + count):
                        await client.enqueue(noop_actors.noop, {"n": i})
                ours += sw.seconds
        finally:
            await conn.close()
    return SingleResult(n / ours, n / raw, n / alone, n / woken)


#: Callers enqueueing at once in the concurrent single-enqueue measurement.
CONCURRENT_CALLERS: Final = 16


@dataclass(frozen=True, slots=True)
class ConcurrentResult:
    """``client.enqueue`` from many callers at once, and raw INSERTs the same way.

    The raw side runs on a pool as large as the client's (10 connections), so
    the two differ only in what each statement and the client do; NOTIFY's
    database-wide commit lock is what a wake-up per enqueue would cost here.
    """

    rate: float
    raw_rate: float


async def enqueue_concurrent(dsn: str, driver: str, n: int) -> ConcurrentResult:
    """jobs/s of ``n`` ``client.enqueue`` calls from :data:`CONCURRENT_CALLERS` tasks, and of
    ``n`` raw INSERTs the same way, taking turns ``SINGLE_CHUNK`` per caller at a time."""
    async with (
        taskq_schema(dsn, "enqc") as schema,
        plain_schema(dsn, "enqc_raw") as raw_schema,
        JobsClient.connect(dsn, driver=driver, schema=schema) as client,
    ):
        conn = await asyncpg.connect(dsn)
        try:
            table = await baseline.create_table(conn, raw_schema)
        finally:
            await conn.close()
        pool = await asyncpg.create_pool(dsn, min_size=10, max_size=10)
        try:
            sql = baseline.INSERT_SQL.format(table=table)

            async def raw_caller(count: int) -> None:
                for i in range(count):
                    await pool.execute(sql, f'{{"n":{i}}}')

            async def our_caller(count: int) -> None:
                for i in range(count):
                    await client.enqueue(noop_actors.noop, {"n": i})

            per_turn = SINGLE_CHUNK // 10
            await asyncio.gather(*(raw_caller(5) for _ in range(CONCURRENT_CALLERS)))
            await asyncio.gather(*(our_caller(5) for _ in range(CONCURRENT_CALLERS)))
            ours = raw = 0.0
            done = 0
            while done < n:
                count = max(1, min(per_turn, (n - done) // CONCURRENT_CALLERS))
                with Stopwatch() as sw:
                    await asyncio.gather(*(raw_caller(count) for _ in range(CONCURRENT_CALLERS)))
                raw += sw.seconds
                with Stopwatch() as sw:
                    await asyncio.gather(*(our_caller(count) for _ in range(CONCURRENT_CALLERS)))
                ours += sw.seconds
                done += count * CONCURRENT_CALLERS
        finally:
            await pool.close()
    return ConcurrentResult(done / ours, done / raw)


async def _bare_insert(conn: asyncpg.Connection, schema: str) -> Callable[[int], Awaitable[float]]:
    """The store's single-enqueue INSERT prepared on ``conn``: runs it ``count`` times
    (a no-op job each, as ``client.enqueue`` writes it) and returns the seconds."""
    names = Schema(schema)
    query = numbered_queries("enqueue", names)["insert_job_bare"]
    prepared = await conn.prepare(query.sql)

    async def run(count: int) -> float:
        args = [
            query.positional(
                {
                    "queue": noop_actors.QUEUE,
                    "actor": noop_actors.noop.name,
                    "payload": f'{{"n":{i}}}',
                    "priority": 0,
                    "max_attempts": None,
                    "channel": names.wake_channel,
                }
            )
            for i in range(count)
        ]
        with Stopwatch() as sw:
            for arg in args:
                await prepared.fetchrow(*arg)
        return sw.seconds

    return run


async def enqueue_bulk(dsn: str, driver: str, n: int, batch: int) -> float:
    """jobs/s of ``n`` jobs written with ``client.enqueue_many`` in batches of ``batch``."""
    async with (
        taskq_schema(dsn, f"enqmany{batch}") as schema,
        JobsClient.connect(dsn, driver=driver, schema=schema) as client,
    ):
        await client.enqueue_many(noop_actors.noop, _payloads(-10, 10))  # warm-up
        with Stopwatch() as sw:
            for start in range(0, n, batch):
                await client.enqueue_many(noop_actors.noop, _payloads(start, min(batch, n - start)))
    return n / sw.seconds


# -- drain ---------------------------------------------------------------------------------


async def fill(dsn: str, schema: str, n: int) -> None:
    """Enqueue ``n`` no-op jobs in batches (untimed: the drain is what is measured)."""
    async with JobsClient.connect(dsn, driver="asyncpg", schema=schema) as client:
        for start in range(0, n, ENQUEUE_BATCH):
            count = min(ENQUEUE_BATCH, n - start)
            await client.enqueue_many(noop_actors.noop, _payloads(start, count))


async def run_drain(
    dsn: str,
    schema: str,
    driver: str,
    n: int,
    concurrency: int,
    *,
    env: Mapping[str, str] | None = None,
    actors: str = NOOP_ACTORS,
    alongside: Callable[[], Awaitable[None]] | None = None,
) -> DrainResult:
    """Fill ``schema`` with ``n`` jobs, then drain them with one ``taskq worker --until-idle``.

    ``env`` is laid over ``worker_env``'s variables; ``alongside`` runs as a task while
    the worker does and is cancelled when it exits.
    """
    await fill(dsn, schema, n)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'ANALYZE "{schema}".jobs')
        worker = {**worker_env(dsn, schema, driver), **(env or {})}
        cpu_before = children_cpu()
        with Stopwatch() as sw:
            proc = await _spawn(worker, worker_command(concurrency, until_idle=True, actors=actors))
            beside = asyncio.create_task(alongside()) if alongside is not None else None
            try:
                code = await asyncio.wait_for(proc.wait(), WORKER_TIMEOUT)
            except BaseException:
                await _stop(proc)
                raise
            finally:
                if beside is not None:
                    beside.cancel()
                    await asyncio.gather(beside, return_exceptions=True)
        cpu = children_cpu() - cpu_before
        span = await db_span(conn, f'"{schema}".jobs', "succeeded")
    finally:
        await conn.close()
    return DrainResult(driver, span, sw.seconds, code, cpu)


async def checked_drain(
    dsn: str,
    driver: str,
    n: int,
    *,
    name: str,
    env: Mapping[str, str],
    actors: str = NOOP_ACTORS,
    alongside: Callable[[], Awaitable[None]] | None = None,
) -> DrainResult:
    """One arm of a drain A/B: ``run_drain`` at C=16 in a fresh schema; the run stops
    (``SystemExit``) when the worker fails or leaves jobs undone, since its numbers
    would mean nothing."""
    async with taskq_schema(dsn, re.sub(r"\W+", "_", name)) as schema:
        result = await run_drain(
            dsn, schema, driver, n, 16, env=env, actors=actors, alongside=alongside
        )
    if result.exit_code != 0:
        raise SystemExit(f"the {name} worker exited {result.exit_code}")
    if result.span.done != n:
        raise SystemExit(f"{name}: {result.span.done} of {n} jobs done")
    return result


async def drain(dsn: str, driver: str, n: int, concurrency: int) -> tuple[DrainResult, PlanResult]:
    """The drain, then the plan check on the same table (``n`` finished rows)."""
    async with taskq_schema(dsn, f"drain_{driver}") as schema:
        result = await run_drain(dsn, schema, driver, n, concurrency)
        plan = await plan_check(dsn, schema)
    return result, plan


# -- latency -------------------------------------------------------------------------------


async def _wait_for(conn: asyncpg.Connection, sql: str, *args: object, seconds: float) -> None:
    """Poll ``sql`` until it returns true (every 5 ms), or raise TimeoutError after ``seconds``."""
    async with asyncio.timeout(seconds):
        while True:
            if await conn.fetchval(sql, *args):
                return
            await asyncio.sleep(0.005)


async def latency(
    dsn: str, driver: str, jobs: int, *, gap_ms: tuple[float, float] = (10.0, 20.0)
) -> LatencyResult:
    """enqueue→start of ``jobs`` jobs sent one at a time to an idle worker (NOTIFY wakes it).

    The worker is started without until-idle and stopped with SIGTERM. Warm-up
    jobs go one at a time until five in a row started within 50 ms (proof that
    the LISTEN is up; it also warms the statement caches); then ``jobs``
    enqueues spaced by a uniform random gap in ``gap_ms``.
    """
    rng = random.Random(1234)
    async with taskq_schema(dsn, f"lat_{driver}") as schema:
        jobs_table = f'"{schema}".jobs'
        done_sql = (
            f"SELECT count(*) = cardinality($1::bigint[]) FROM {jobs_table}"
            " WHERE id = ANY($1::bigint[]) AND status = 'succeeded'"
        )
        millis_sql = (
            f"SELECT extract(epoch FROM started_at - created_at) * 1000 AS ms"
            f" FROM {jobs_table} WHERE id = ANY($1::bigint[])"
        )
        conn = await asyncpg.connect(dsn)
        proc = await _spawn(worker_env(dsn, schema, driver), worker_command(16, until_idle=False))
        try:
            await _wait_for(conn, f'SELECT count(*) > 0 FROM "{schema}".workers', seconds=60)
            async with JobsClient.connect(dsn, driver=driver, schema=schema) as client:
                fast_in_a_row = 0
                for _ in range(WARM_UP_MAX):
                    warm = [(await client.enqueue(noop_actors.noop, {"n": -1})).job_id]
                    await _wait_for(conn, done_sql, warm, seconds=60)
                    started_ms = await conn.fetchval(millis_sql, warm)
                    fast_in_a_row = fast_in_a_row + 1 if started_ms < 50 else 0
                    if fast_in_a_row == 5:
                        break
                else:
                    raise RuntimeError(f"{driver} worker never picked jobs up within 50 ms")
                ids: list[int] = []
                for i in range(jobs):
                    await asyncio.sleep(rng.uniform(*gap_ms) / 1000)
                    ids.append((await client.enqueue(noop_actors.noop, {"n": i})).job_id)
                await _wait_for(conn, done_sql, ids, seconds=60)
            rows = await conn.fetch(millis_sql, ids)
        finally:
            await _stop(proc)
            await conn.close()
    return LatencyResult(driver, tuple(float(r["ms"]) for r in rows))


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()


# -- plan check ----------------------------------------------------------------------------

#: The claim's parameters as SQL literals, for ``EXECUTE`` (constants of ours, never input).
_CLAIM_LITERALS: Final = {
    "now": "NULL",
    "queues": f"ARRAY['{noop_actors.QUEUE}']",
    "queue": f"'{noop_actors.QUEUE}'",
    "actors": f"ARRAY['{noop_actors.noop.name}']",
    "limit": "16",
    "start_now": "16",
    "worker_id": "'plan-check'",
    "lease": "interval '60 seconds'",
    "is_leader": "false",
    # The heartbeat's leases to let lapse: none.
    "lapse_job_id": "'{}'",
    "lapse_fencing_token": "'{}'",
    # The terminal writes that may travel with the claim: none here.
    **{name: "'{}'" for name in WRITE_PARAMS},
}


async def plan_check(dsn: str, schema: str, pending: int = 1_000) -> PlanResult:
    """EXPLAIN the worker's claim after ANALYZE: custom and generic plan.

    A worker on one queue runs ``finish_and_claim``, the statement checked here;
    the heartbeat is checked too (the drain left dead running-index entries).

    The drained table holds many finished rows; ``pending`` more jobs are
    enqueued so the claim has something to find. The statement is prepared
    as a worker's statement cache prepares it; the generic plan is the one
    Postgres may switch to after five executions.
    """
    async with JobsClient.connect(dsn, driver="asyncpg", schema=schema) as client:
        await client.enqueue_many(noop_actors.noop, _payloads(0, pending))
    query = numbered_queries("claim", Schema(schema))["finish_and_claim"]
    execute = "EXECUTE taskq_claim({})".format(
        ", ".join(_CLAIM_LITERALS[name] for name in query.params)
    )
    beat = numbered_queries("workers", Schema(schema))["heartbeat"]
    execute_beat = "EXECUTE taskq_heartbeat({})".format(
        ", ".join(_CLAIM_LITERALS[name] for name in beat.params)
    )
    conn = await asyncpg.connect(dsn)
    try:
        finished = await conn.fetchval(
            f"SELECT count(*) FROM \"{schema}\".jobs WHERE status = 'succeeded'"
        )
        await conn.execute(f'ANALYZE "{schema}".jobs')
        await conn.execute(f"PREPARE taskq_claim AS {query.sql}")
        await conn.execute(f"PREPARE taskq_heartbeat AS {beat.sql}")
        plans, beats = [], []
        for mode in ("force_custom_plan", "force_generic_plan"):
            await conn.execute(f"SET plan_cache_mode = {mode}")
            rows = await conn.fetch(f"EXPLAIN {execute}")
            plans.append("\n".join(row[0] for row in rows))
            rows = await conn.fetch(f"EXPLAIN {execute_beat}")
            beats.append("\n".join(row[0] for row in rows))
    finally:
        await conn.close()
    return PlanResult(finished, plans[0], plans[1], tuple(beats))
