"""What the per-job attempt records cost a succeeded job while DEBUG is off.

Every job passes ``attempt_log.started`` (when its actor is called) and
``attempt_log.concluded`` (when its outcome is decided). With the worker
logger above DEBUG a success makes no record: the cost is two calls and two
``Logger.isEnabledFor`` checks. This times exactly that, on real objects,
against the same loop without the calls::

    python benchmarks/bench_attempt_log.py            # 7 rounds of 1,000,000 jobs
"""

from __future__ import annotations

import asyncio
import logging
import sys
import timeit
from datetime import timedelta
from typing import Any, cast

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.app.worker import attempt_log
from taskq.app.worker.state import ActiveJob, WorkerState
from taskq.domain.job import ClaimedJob, NewJob
from taskq.domain.outcomes import Complete, Succeeded
from taskq.ports.store_params import ClaimRequest

LEASE = timedelta(seconds=60)
NUMBER = 1_000_000
ROUNDS = 7


async def _claimed() -> ClaimedJob:
    store = MemoryBackend(clock=FakeClock()).store()
    await store.enqueue(NewJob(actor="a"))
    [job] = await store.claim(
        ClaimRequest(worker_id="w", queues=["default"], actors=["a"], limit=1, lease=LEASE)
    )
    return job


def main() -> None:
    logging.getLogger().setLevel(logging.INFO)  # TASKQ_LOG_LEVEL's default
    job = asyncio.run(_claimed())
    active = ActiveJob(job, cast(Any, None))
    outcome, decision = Succeeded(None), Complete(None)
    state = cast(WorkerState, None)  # read only when a record is made
    started, concluded = attempt_log.started, attempt_log.concluded

    def with_records() -> None:
        started(job)
        concluded(active, outcome, decision, state)

    def without() -> None:
        pass

    per_job: dict[str, float] = {}
    for name, body in (("without", without), ("with", with_records)):
        best = min(timeit.repeat(body, number=NUMBER, repeat=ROUNDS))
        per_job[name] = best / NUMBER * 1e9
    cost = per_job["with"] - per_job["without"]
    print(
        f"Python {sys.version.split()[0]}: {per_job['with']:.0f} ns per job with the two "
        f"calls, {per_job['without']:.0f} ns without: {cost:.0f} ns per job"
    )


if __name__ == "__main__":
    main()
