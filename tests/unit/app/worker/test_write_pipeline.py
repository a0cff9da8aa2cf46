"""Terminal writes are batched and not awaited by the consumer (memory adapter, fake clock).

A consumer submits its job's terminal write and takes the next job at once;
until-idle waits for outstanding writes; a write that fails is logged and
leaves the job to its lease.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import (
    StoreProxy,
    WorkerRun,
    events_named,
    fields,
    job,
    make_settings,
)

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker import ExitCode, events
from taskq.app.worker.protocols import Registry
from taskq.domain.errors import StoreUnavailable
from taskq.domain.job import ClaimedJob, Lease
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, Finish


class Num(BaseModel):
    n: int


RUNS: Counter[int] = Counter()
GATES: list[asyncio.Event] = []


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    RUNS.clear()
    yield
    # Open every gate a failed test left shut, so its workers can be stopped.
    for gate in GATES:
        gate.set()
    GATES.clear()


@actor
async def count(payload: Num) -> int:
    RUNS[payload.n] += 1
    return payload.n


@actor(retry=RetryPolicy(kind="non_retryable"))
async def broken(payload: Num) -> None:
    RUNS[payload.n] += 1
    raise ValueError(f"bad {payload.n}")


REGISTRY: Registry = {"count": count, "broken": broken}


class GatedFinish(StoreProxy):
    """The memory store whose terminal writes wait for ``gate`` (a slow database):
    ``finish_many``, and ``finish_and_claim`` (the writes that ride on a claim).

    ``apply_first``: the rows are written before the wait (committed, answer not back
    yet); otherwise the wait comes before the write. ``failures``: how many
    finish_many calls raise StoreUnavailable (without writing) before the rest work.
    """

    def __init__(
        self, inner: MemoryQueueStore, *, apply_first: bool = False, failures: int = 0
    ) -> None:
        super().__init__(inner)
        self.gate = asyncio.Event()
        GATES.append(self.gate)
        self.apply_first = apply_first
        self.failures = failures
        self.calls: list[list[int]] = []
        self.landed: list[int] = []

    async def finish_many(self, outcomes: Sequence[Finish]) -> list[Lease]:
        self.calls.append([o.lease.job_id for o in outcomes])
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("finish_many: connection reset")
        if self.apply_first:
            lost = await self._inner.finish_many(outcomes)
            await self.gate.wait()
        else:
            await self.gate.wait()
            lost = await self._inner.finish_many(outcomes)
        self.landed.extend(o.lease.job_id for o in outcomes)
        return list(lost)

    async def finish_and_claim(
        self, finishes: Sequence[Finish], request: ClaimRequest
    ) -> tuple[list[Lease], list[ClaimedJob]]:
        # Which of the two carries a write depends on timing (a claim in flight or not).
        lost = await self.finish_many(finishes)
        return lost, await self._inner.claim(request)


async def enqueue(client: MemoryQueueStore, clock: FakeClock, ref: Any, *ns: int) -> list[int]:
    return [(await client.enqueue(ref.new_job({"n": n}, now=clock.now()))).job_id for n in ns]


async def test_the_next_job_starts_before_the_first_write_lands(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """One slot, a database that does not answer: the second job runs while the first
    job's terminal write is still outstanding; both land once it answers."""
    first, second = await enqueue(client, clock, count, 1, 2)
    store = GatedFinish(backend.store())
    run = WorkerRun(backend, clock, REGISTRY, make_settings(max_concurrency=1), store=store)
    await run.start()
    await run.advance(1)

    assert Counter({1: 1, 2: 1}) == RUNS
    assert store.calls[0] == [first]
    assert store.landed == []
    assert (await job(client, first)).status is JobStatus.RUNNING  # its write is held
    assert run.state.ledger.writes_in_flight == 2

    store.gate.set()
    await clock.run_until_idle()
    assert sorted(store.landed) == [first, second]
    for job_id in (first, second):
        assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert run.state.ledger.writes_in_flight == 0
    assert await run.stop() == 0


async def test_until_idle_waits_for_writes_in_flight(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """The failed job's row is written but the answer is not back: the queues read empty,
    yet until-idle does not exit (its exit code depends on that answer); once the answer
    arrives it exits 3."""
    [failing] = await enqueue(client, clock, broken, 1)
    store = GatedFinish(backend.store(), apply_first=True)
    settings = make_settings(idle_poll_interval=1.0, idle_settle_window=0.0)
    run = WorkerRun(backend, clock, REGISTRY, settings, store=store, until_idle=True)
    await run.start()
    await run.advance(5)

    assert (await job(client, failing)).status is JobStatus.FAILED  # committed...
    assert await client.count_active() == 0
    assert run.state.ledger.writes_in_flight == 1  # ...but not answered
    assert run.task is not None
    assert not run.task.done()

    store.gate.set()
    assert await run.finish(within=5) == ExitCode.UNTIL_IDLE_FAILURES


async def test_a_failed_terminal_write_is_logged_and_retried(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """finish_many raising: job-write-failed (ERROR) names the job, the write, the error
    and the retry delay; the row keeps its lease meanwhile and the consumer goes on; the
    retry writes the outcome the job had (it does not run again)."""
    [job_id, other] = await enqueue(client, clock, count, 1, 2)
    store = GatedFinish(backend.store(), failures=1)
    store.gate.set()
    run = WorkerRun(backend, clock, REGISTRY, make_settings(max_concurrency=1), store=store)
    await run.start()
    await run.advance(0.1)

    [failed] = events_named(caplog, events.JOB_WRITE_FAILED)
    assert failed.levelname == "ERROR"
    assert fields(failed) == {
        "job_id": job_id,
        "write": "Complete",
        "error": "finish_many: connection reset",
        "retry_in": 0.5,
    }
    waiting = await job(client, job_id)
    assert (waiting.status, waiting.locked_by) == (JobStatus.RUNNING, run.worker.worker_id)
    assert (await job(client, other)).status is JobStatus.SUCCEEDED
    assert run.state.ledger.writes_in_flight == 1

    await run.advance(1)
    assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert Counter({1: 1, 2: 1}) == RUNS
    assert run.state.ledger.writes_in_flight == 0
    await run.stop()


async def test_a_drain_during_an_outstanding_write_does_not_repend_that_job(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A quick job finished, its write not yet answered, then SIGTERM: the drain must not
    hand the job back (it ran), so it ends succeeded and runs exactly once."""
    [job_id] = await enqueue(client, clock, count, 1)
    store = GatedFinish(backend.store())
    first = WorkerRun(backend, clock, REGISTRY, store=store)
    await first.start()
    assert Counter({1: 1}) == RUNS
    assert store.calls == [[job_id]]
    first.worker.request_shutdown()
    await clock.run_until_idle()  # the drain runs while the write waits
    store.gate.set()
    await first.finish(within=10)

    second = WorkerRun(backend, clock, REGISTRY)  # another worker picks up what is pending
    await second.start()
    await second.advance(1)
    await second.stop()
    done = await job(client, job_id)
    assert Counter({1: 1}) == RUNS
    assert done.status is JobStatus.SUCCEEDED


class FailingFinish(StoreProxy):
    """The memory store whose terminal writes fail with an error it does not translate
    (a custom adapter's audit hook, a driver error that escaped)."""

    async def finish_many(self, outcomes: Sequence[Finish]) -> list[Lease]:
        raise ConnectionError("audit db connection reset")

    async def finish_and_claim(
        self, finishes: Sequence[Finish], request: ClaimRequest
    ) -> tuple[list[Lease], list[ClaimedJob]]:
        if finishes:
            raise ConnectionError("audit db connection reset")
        return [], await self._inner.claim(request)


async def test_a_job_whose_terminal_write_failed_is_not_drained_as_never_started(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A quick non-retryable job ran and its terminal write failed, then the worker
    stopped: the drain must not take the job for one that never started and re-pend it
    (the next worker would run it again). It ran: the worker's hand-back as it stops
    ends it crashed, and no worker runs it again."""
    [job_id] = await enqueue(client, clock, broken, 1)
    first = WorkerRun(backend, clock, REGISTRY, store=FailingFinish(backend.store()))
    await first.start()
    await first.advance(1)
    assert Counter({1: 1}) == RUNS
    await first.stop()
    held = await job(client, job_id)
    assert (held.status, held.attempt) == (JobStatus.CRASHED, 1)

    second = WorkerRun(backend, clock, REGISTRY)
    await second.start()
    await second.advance(1)
    await second.stop()
    assert Counter({1: 1}) == RUNS
