"""What a claim on a round_robin queue costs as its backlog grows, against a strict-FIFO one.

    python benchmarks/bench_round_robin.py [--backlogs 1000,20000,100000] [--cohorts 1,100,1000]
                                           [--claims 20]

For each backlog and number of fairness cohorts, a fresh schema gets that many
pending no-op jobs (``JobsClient.enqueue_many``, the keys spread evenly over
the cohorts) and is ANALYZEd; then the store claims 16 jobs at a time, first
with the queue in strict_fifo mode, then in round_robin mode, and prints the
milliseconds per claim of each and their ratio. A round-robin claim must
order jobs by cohort, so it cannot be as cheap as a FIFO one; what matters is
that its cost follows the number of cohorts, not the backlog.

Server: TASKQ_PG_DSN, else TASKQ_TEST_DSN, else postgresql://postgres@127.0.0.1:5432/test.
A benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import timedelta

import asyncpg
import noop_actors
from bench_support import resolve_dsn, taskq_schema

from taskq import JobsClient
from taskq.domain.actor_config import QueueMode
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import ClaimRequest

CLAIM_LIMIT = 16
FILL_BATCH = 10_000


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


async def _fill(client: JobsClient, backlog: int, cohorts: int) -> None:
    per_cohort = max(backlog // cohorts, 1)
    for cohort in range(cohorts):
        key = f"tenant-{cohort}" if cohorts > 1 else None
        for start in range(0, per_cohort, FILL_BATCH):
            payloads = [{"n": n} for n in range(start, min(per_cohort, start + FILL_BATCH))]
            await client.enqueue_many(noop_actors.noop, payloads, fairness_key=key)


async def _ms_per_claim(store: QueueStore, claims: int) -> float:
    request = ClaimRequest(
        worker_id="bench",
        queues=[noop_actors.QUEUE],
        actors=[noop_actors.noop.name],
        limit=CLAIM_LIMIT,
        lease=timedelta(minutes=5),
    )
    await store.claim(request)  # prepares the statement, warms the cache
    started = time.perf_counter()
    for _ in range(claims):
        await store.claim(request)
    return (time.perf_counter() - started) / claims * 1000


async def measure(dsn: str, backlog: int, cohorts: int, claims: int) -> tuple[float, float]:
    """Milliseconds per claim: (strict_fifo, round_robin)."""
    async with (
        taskq_schema(dsn, "rr") as schema,
        JobsClient.connect(dsn, driver="asyncpg", schema=schema) as client,
    ):
        await _fill(client, backlog, cohorts)
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f'ANALYZE "{schema}".jobs')
        finally:
            await conn.close()
        store = client.store
        fifo = await _ms_per_claim(store, claims)
        await store.set_queue_mode(noop_actors.QUEUE, QueueMode.ROUND_ROBIN)
        rr = await _ms_per_claim(store, claims)
    return fifo, rr


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlogs", type=_ints, default=[1_000, 20_000, 100_000])
    parser.add_argument("--cohorts", type=_ints, default=[1, 100, 1_000])
    parser.add_argument("--claims", type=int, default=20, help="claims timed per mode")
    args = parser.parse_args(argv)
    dsn = resolve_dsn()
    print(f"{'backlog':>9} {'cohorts':>8} {'fifo ms':>9} {'rr ms':>9} {'rr/fifo':>8}")
    for cohorts in args.cohorts:
        for backlog in args.backlogs:
            fifo, rr = await measure(dsn, backlog, cohorts, args.claims)
            print(f"{backlog:>9,} {cohorts:>8,} {fifo:>9.1f} {rr:>9.1f} {rr / fifo:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
