"""An outcome no store can keep fails its own job, never the jobs sharing its write.

Terminal writes travel in batches (alone, or riding on a claim), and a store refuses a
batch whole when one write of it holds what it cannot keep. Before, one actor's NaN
result failed the batch's write for every job in it: each was left running until its
lease expired and was then run again, and the same result took them down again.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta

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
from taskq.app.worker.refused_writes import FailedInstead, finish_flush
from taskq.domain.errors import StoreUnavailable
from taskq.domain.job import ClaimedJob, Lease
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, Finish

RUNS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()


class Word(BaseModel):
    text: str


class Measure(BaseModel):
    value: float


@actor
async def measure(payload: Word) -> Measure:
    RUNS[payload.text] += 1
    return Measure(value=math.nan if payload.text == "nan" else 1.5)


@actor(retry=RetryPolicy(kind="non_retryable"))
async def complain(payload: Word) -> None:
    RUNS[payload.text] += 1
    # A message made of undecodable bytes, as os.fsdecode or a subprocess's output gives.
    raise ValueError(b"no such file: caf\xe9".decode("utf-8", "surrogateescape"))


@actor
async def echo(payload: Word) -> str:
    RUNS[payload.text] += 1
    return payload.text


async def _run_all(
    backend: MemoryBackend, clock: FakeClock, run: WorkerRun, ids: Sequence[int]
) -> None:
    await run.start()
    for _ in range(100):
        await run.advance(0.05)
        stored = [await backend.store().get(i) for i in ids]
        if all(j is not None and j.status.is_terminal for j in stored):
            return


async def test_a_nan_result_or_an_undecodable_message_fails_only_its_own_job(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """A NaN in a result fails that job for good, saying where the NaN is; an error text
    holding a lone surrogate is stored escaped; every other job of the run succeeds, and
    each job ran once."""
    enqueue = client.enqueue
    bad = (await enqueue(measure.new_job({"text": "nan"}, now=clock.now()))).job_id
    odd = (await enqueue(complain.new_job({"text": "odd"}, now=clock.now()))).job_id
    good = [
        (await enqueue(measure.new_job({"text": f"ok{i}"}, now=clock.now()))).job_id
        for i in range(6)
    ]
    registry: Registry = {"measure": measure, "complain": complain}
    run = WorkerRun(backend, clock, registry, make_settings(max_concurrency=4))
    await _run_all(backend, clock, run, [bad, odd, *good])

    nan_job = await client.get(bad)
    assert nan_job is not None
    assert nan_job.status is JobStatus.FAILED
    assert (
        "ValueError: the result of actor 'measure' cannot be stored: "
        "result['value'] is nan (JSON has no NaN or infinity) (error is not retryable)"
    ) in (nan_job.last_error or "")
    odd_job = await client.get(odd)
    assert odd_job is not None
    assert odd_job.status is JobStatus.FAILED
    assert "ValueError: no such file: caf\\udce9" in (odd_job.last_error or "")
    for job_id in good:
        stored = await client.get(job_id)
        assert stored is not None
        assert (stored.status, stored.result) == (JobStatus.SUCCEEDED, {"value": 1.5})
    assert set(RUNS.values()) == {1}
    assert await run.stop() == 0


class SmallResults(StoreProxy):
    """A store that keeps results of at most 5 characters, refusing a batch whole (as the
    contract says) when one write of it holds a longer one: a custom adapter's own limit.

    Its claims take a few loop turns, as a database round trip does, so consumers finish
    jobs meanwhile and their writes ride on the next claim.
    """

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.refused: list[tuple[str, int]] = []

    def _check(self, method: str, outcomes: Sequence[Finish]) -> None:
        if any(isinstance(o.result, str) and len(o.result) > 5 for o in outcomes):
            self.refused.append((method, len(outcomes)))
            raise ValueError("a result longer than 5 characters does not fit this store")

    async def finish_many(self, outcomes: Sequence[Finish]) -> list[Lease]:
        self._check("finish_many", outcomes)
        return list(await self._inner.finish_many(outcomes))

    async def finish_and_claim(
        self, finishes: Sequence[Finish], request: ClaimRequest
    ) -> tuple[list[Lease], list[ClaimedJob]]:
        for _ in range(5):
            await asyncio.sleep(0)
        self._check("finish_and_claim", finishes)
        lost, claimed = await self._inner.finish_and_claim(finishes, request)
        return list(lost), list(claimed)

    async def claim(self, request: ClaimRequest) -> list[ClaimedJob]:
        for _ in range(5):
            await asyncio.sleep(0)
        return list(await self._inner.claim(request))


async def test_a_write_the_store_refuses_fails_its_job_and_the_rest_of_the_batch_lands(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A batch of writes riding on a claim is refused: its writes are made again one by
    one, the refused one becomes a failure of its job that says why (and the job does not
    run again), the others land as they were, the claim is made again on its own, and
    the worker goes on. (The completer's own batches: the next test.)"""
    texts = [f"w{i}" for i in range(30)]
    texts[3] = "too long for it"
    texts[17] = "too long as well"
    ids = [(await client.enqueue(echo.new_job({"text": t}, now=clock.now()))).job_id for t in texts]
    store = SmallResults(backend.store())
    settings = make_settings(max_concurrency=4, notify_enabled=False, poll_interval=60.0)
    run = WorkerRun(backend, clock, {"echo": echo}, settings, store=store)
    await _run_all(backend, clock, run, ids)

    # A claim carrying the bad write and others with it was refused.
    assert any(m == "finish_and_claim" and n > 1 for m, n in store.refused), store.refused
    for job_id, text in zip(ids, texts, strict=True):
        stored = await client.get(job_id)
        assert stored is not None
        if len(text) > 5:
            assert stored.status is JobStatus.FAILED
            assert stored.last_error == (
                "the job's outcome (succeeded) could not be stored: ValueError: "
                "a result longer than 5 characters does not fit this store"
            )
            [attempt] = await client.attempts(job_id)
            assert attempt.error_class == "ValueError"
        else:
            assert (stored.status, stored.result) == (JobStatus.SUCCEEDED, text)
    assert Counter(texts) == RUNS  # each ran once
    records = events_named(caplog, events.JOB_WRITE_FAILED)
    assert sorted(fields(r)["job_id"] for r in records) == [ids[3], ids[17]]
    assert {fields(r)["written_instead"] for r in records} == {"failed"}
    assert await run.stop() == 0


async def test_the_flush_answers_each_write_of_a_refused_batch_on_its_own(
    backend: MemoryBackend, clock: FakeClock
) -> None:
    """The completer's flush on the memory store: a batch with a NaN result is written
    one write at a time; a lease no longer held is still reported lost."""
    store = backend.store()
    leases = []
    for i in range(3):
        await store.enqueue(echo.new_job({"text": str(i)}, now=clock.now()))
    request = ClaimRequest(
        worker_id="w", queues=["default"], actors=["echo"], limit=3, lease=timedelta(seconds=30)
    )
    leases = [claimed.lease for claimed in await store.claim(request)]
    gone = Lease(leases[2].job_id, leases[2].fencing_token + 1)
    answers = await finish_flush(store)(
        [
            Finish(lease=leases[0], status=JobStatus.SUCCEEDED, result="a"),
            Finish(lease=leases[1], status=JobStatus.SUCCEEDED, result=[math.inf]),
            Finish(lease=gone, status=JobStatus.SUCCEEDED, result="c"),
        ]
    )
    assert answers == [False, FailedInstead(lost=False), True]
    first, second, third = [await job(store, lease.job_id) for lease in leases]
    assert (first.status, first.result) == (JobStatus.SUCCEEDED, "a")
    assert second.status is JobStatus.FAILED
    assert (second.last_error or "").startswith("the job's outcome (succeeded) could not be stored")
    assert third.status is JobStatus.RUNNING


class DownAfterRefusal(StoreProxy):
    """The batch is refused for a bad result, then the database goes away."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.calls = 0

    async def finish_many(self, outcomes: Sequence[Finish]) -> list[Lease]:
        self.calls += 1
        if self.calls == 1:
            raise ValueError("refused: a value this store cannot keep")
        raise StoreUnavailable("connection refused")


async def test_a_database_failure_while_writing_one_by_one_answers_the_rest_at_once(
    backend: MemoryBackend,
) -> None:
    """Once the database fails, the remaining writes get that failure (their consumers
    retry them) instead of one slow failing round trip each."""
    store = DownAfterRefusal(backend.store())
    leases = [Lease(i, 1) for i in range(1, 6)]
    answers = await finish_flush(store)(
        [Finish(lease=lease, status=JobStatus.SUCCEEDED) for lease in leases]
    )
    assert store.calls == 2  # the batch, then the first write alone
    assert all(isinstance(answer, StoreUnavailable) for answer in answers), answers
    assert len(answers) == 5


async def test_until_idle_counts_a_job_failed_instead_as_a_failure(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Its actor succeeded, but the job ended failed: --until-idle exits 3, not 0."""
    for text in ("ok", "much too long", "fine"):
        await client.enqueue(echo.new_job({"text": text}, now=clock.now()))
    settings = make_settings(max_concurrency=2, idle_poll_interval=1.0, idle_settle_window=0.0)
    store = SmallResults(backend.store())
    run = WorkerRun(backend, clock, {"echo": echo}, settings, store=store, until_idle=True)
    await run.start()
    assert await run.finish(within=30) == ExitCode.UNTIL_IDLE_FAILURES
    assert store.refused  # the write was refused, and failed instead
