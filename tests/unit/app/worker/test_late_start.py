"""A job claimed after its deadline (schedule_to_close) fails without running.

The leader's deadline sweep fails waiting jobs past their deadline every 30 s; in
between, a claim can take one. Before, the worker ran it anyway, however late: a
"send within 5 minutes" job went out an hour later if a backlog held it.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import StoreProxy, WorkerRun, job

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.domain.status import JobStatus

RUNS: Counter[int] = Counter()


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()


class Num(BaseModel):
    n: int


@actor
async def send(payload: Num) -> None:
    RUNS[payload.n] += 1


class NoSweep(StoreProxy):
    """The store as it is between two deadline sweeps: none has failed the job yet."""

    async def fail_past_deadline(self, **_: object) -> list[int]:
        return []


async def test_a_job_claimed_after_its_deadline_fails_unrun(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """The late job ends failed with DeadlineExceeded, its actor never called; a job whose
    deadline is still ahead runs as ever."""
    now = clock.now()
    late = (
        await client.enqueue(
            send.new_job({"n": 1}, schedule_to_close=now + timedelta(seconds=5), now=now)
        )
    ).job_id
    timely = (
        await client.enqueue(
            send.new_job({"n": 2}, schedule_to_close=now + timedelta(hours=1), now=now)
        )
    ).job_id
    await clock.advance_async(10)  # a backlog held them: the first one's deadline passed
    run = WorkerRun(backend, clock, {"send": send}, store=NoSweep(backend.store()))
    await run.start()
    await run.advance(1)

    failed = await job(client, late)
    assert failed.status is JobStatus.FAILED
    assert (failed.last_error or "").startswith(
        f"deadline {(now + timedelta(seconds=5)).isoformat()} passed at "
    )
    assert (failed.last_error or "").endswith("the job was claimed after it and did not run")
    [attempt] = await client.attempts(late)
    assert attempt.error_class == "DeadlineExceeded"
    assert (await job(client, timely)).status is JobStatus.SUCCEEDED
    assert Counter({2: 1}) == RUNS
    assert await run.stop() == 0
