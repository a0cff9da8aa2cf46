"""A running worker's writes are bounded: a call the store never answers is given up.

On a network that stopped answering, a write (or its wait for a pool
connection) would otherwise hang for the kernel's TCP timeouts, holding the
completer, the start marks or a consumer slot with it. An outcome write is given
up after the job's lease (``TASKQ_LOCK_LEASE``, the default 60 s here), a start
mark (written again next round) and the heartbeat's own writes after
``TASKQ_HEARTBEAT_COMMAND_TIMEOUT``; each is then treated as any store failure.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import (
    StoreProxy,
    WorkerRun,
    claim_one,
    events_named,
    fields,
    make_settings,
    memory_ports,
)

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker import events, producer
from taskq.app.worker.batching import GroupCommit
from taskq.app.worker.refused_writes import Written, finish_flush
from taskq.app.worker.state import WorkerState
from taskq.domain.errors import StoreTimeout
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish

TIMEOUT = 2.0
#: The default lease, which bounds a job's own writes.
LEASE = 60.0


class Task(BaseModel):
    seconds: float = 0.0


@actor
async def quick(payload: Task) -> None:
    await asyncio.sleep(0)


#: The fake clock ``naps`` sleeps on (set per test).
CLOCK: list[FakeClock] = []


@actor
async def naps(payload: Task) -> None:
    await CLOCK[-1].sleep(payload.seconds)


class FirstCallHangs(StoreProxy):
    """The first call of ``method`` never answers (nor acknowledges its cancellation,
    as on a dead socket) until the test ends; later calls go through."""

    def __init__(self, inner: MemoryQueueStore, method: str) -> None:
        super().__init__(inner)
        self.method = method
        self.end = asyncio.Event()
        self.hung = 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._inner, name)
        if name not in (self.method, "claim"):
            return real

        if name == "claim":
            # As if no consumer were waiting: the job is claimed ahead, so its start is
            # written by a start mark rather than by its claim.
            return lambda request: real(replace(request, start_now=0))

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.hung += 1
            if self.hung == 1:
                while not self.end.is_set():
                    try:
                        await self.end.wait()
                    except asyncio.CancelledError:
                        continue
                raise ConnectionResetError("gone")
            return await real(*args, **kwargs)

        return call


async def _status(client: MemoryQueueStore, job_id: int) -> JobStatus | None:
    stored = await client.get(job_id)
    return None if stored is None else stored.status


async def _run_until_succeeded(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    store: FirstCallHangs,
    registry: dict[str, Any],
    job_id: int,
) -> None:
    run = WorkerRun(
        backend,
        clock,
        registry,
        make_settings(heartbeat_command_timeout=TIMEOUT),
        store=store,
    )
    try:
        await run.start()
        for _ in range(2 * int(LEASE) + 30):
            await run.advance(1)
            if await _status(client, job_id) is JobStatus.SUCCEEDED:
                break
        assert await _status(client, job_id) is JobStatus.SUCCEEDED
        run.worker.request_shutdown()
        assert await run.finish(within=120) == 0
    finally:
        store.end.set()


async def test_a_terminal_write_that_never_answers_is_given_up_and_written_again(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = await client.enqueue(quick.new_job({}, now=clock.now()))
    store = FirstCallHangs(backend.store(), "finish_many")
    await _run_until_succeeded(backend, clock, client, store, {"quick": quick}, job.job_id)
    failed = [r for r in events_named(caplog, events.JOB_WRITE_FAILED) if "retry_in" in fields(r)]
    # On Python 3.12 the outcome can take another write path than finish_many (the
    # event loop orders the tasks differently); when it went through the hung call, that
    # call was given up at the lease and the outcome written again.
    if store.hung:
        [given_up] = failed
        assert f"TASKQ_LOCK_LEASE={LEASE:g}s" in fields(given_up)["error"]


async def test_a_start_mark_that_never_answers_is_given_up_and_written_again(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    CLOCK.append(clock)
    job = await client.enqueue(naps.new_job({"seconds": 10}, now=clock.now()))
    store = FirstCallHangs(backend.store(), "mark_started")
    await _run_until_succeeded(backend, clock, client, store, {"naps": naps}, job.job_id)
    assert store.hung >= 2  # marked on a later round
    assert any(
        fields(r).get("write") == "start" for r in events_named(caplog, events.JOB_WRITE_FAILED)
    )


@actor
async def fails(payload: Task) -> None:
    raise RuntimeError("boom")


async def test_a_reschedule_that_never_answers_frees_its_consumer(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A retry's reschedule the store never answers: given up after the lease (left to
    the lease), and the consumer runs the next job instead of waiting for ever."""
    failing = await client.enqueue(fails.new_job({}, now=clock.now()))
    store = FirstCallHangs(backend.store(), "reschedule")
    run = WorkerRun(
        backend,
        clock,
        {"fails": fails, "quick": quick},
        make_settings(heartbeat_command_timeout=TIMEOUT, max_concurrency=1),
        store=store,
    )
    try:
        await run.start()
        await run.advance(1)
        assert store.hung == 1
        after = await client.enqueue(quick.new_job({}, now=clock.now()))
        for _ in range(int(LEASE) + 10):
            await run.advance(1)
            if await _status(client, after.job_id) is JobStatus.SUCCEEDED:
                break
        assert await _status(client, after.job_id) is JobStatus.SUCCEEDED
        [failed] = [
            r
            for r in events_named(caplog, events.JOB_WRITE_FAILED)
            if fields(r).get("job_id") == failing.job_id
        ]
        assert "TASKQ_LOCK_LEASE" in fields(failed)["error"]
        run.worker.request_shutdown()
        assert await run.finish(within=120) == 0
    finally:
        store.end.set()


@actor
async def deaf(payload: Task) -> None:
    await asyncio.Event().wait()  # ignores its cancel event; a task cancel stops it


class CountedBeats(FirstCallHangs):
    beats = 0

    async def heartbeat(self, beat: Any) -> Any:
        self.beats += 1
        return await self._inner.heartbeat(beat)


async def test_an_escalation_that_never_answers_does_not_stop_the_heartbeat(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The heartbeat writes a user's cancel's FORCED phase itself: unanswered, it held the
    heartbeat loop (no more beats: the leases of every job lapse). It is given up after
    the command timeout and the beats go on."""
    job_id = (await client.enqueue(deaf.new_job({}, now=clock.now()))).job_id
    store = CountedBeats(backend.store(), "escalate_cancel")
    settings = make_settings(
        heartbeat_command_timeout=TIMEOUT, cancellation_grace_period=10.0, cleanup_grace_period=10.0
    )
    run = WorkerRun(backend, clock, {"deaf": deaf}, settings, store=store)
    try:
        await run.start()
        await client.request_cancel(job_id)
        await run.advance(30)  # beats at 10, 20: the grace is over, the escalation hangs
        assert store.hung == 1
        beats = store.beats
        await run.advance(30)
        assert store.beats >= beats + 2
        assert any(
            fields(r).get("write") == "escalate"
            for r in events_named(caplog, events.JOB_WRITE_FAILED)
        )
        run.worker.request_shutdown()
        assert await run.finish(within=120) == 0
    finally:
        store.end.set()


class RefusesCarriedWrites(StoreProxy):
    """Refuses the writes a claim carries as unstorable (so the producer writes them one
    by one); the first of those never answers (nor acknowledges its cancellation)."""

    def __init__(self, inner: MemoryQueueStore) -> None:
        super().__init__(inner)
        self.end = asyncio.Event()
        self.calls = 0

    async def finish_and_claim(self, finishes: Any, request: Any) -> Any:
        raise ValueError("a value this store cannot keep")

    async def finish_many(self, outcomes: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            while not self.end.is_set():
                try:
                    await self.end.wait()
                except asyncio.CancelledError:
                    continue
            raise ConnectionResetError("gone")
        return await self._inner.finish_many(outcomes)


async def test_a_carried_write_the_producer_writes_alone_is_given_up_at_the_lease(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """The producer's one-by-one fallback is bounded like the completer's writes: a hung
    write cannot hold the claim (and with it the claim lock, and the shutdown's drain)."""
    await client.enqueue(quick.new_job({}, now=clock.now()))
    store = RefusesCarriedWrites(backend.store())
    state = WorkerState(
        settings=make_settings(heartbeat_command_timeout=TIMEOUT),
        ports=memory_ports(backend, clock, store),
        registry={"quick": quick},
        worker_id="w1",
    )
    claimed = await claim_one(client, worker_id="w1", queue=quick.queue, actor="quick")
    completer: GroupCommit[Finish, Written] = GroupCommit("completions", finish_flush(store))
    state.completer = completer  # not running: the producer's claim carries what is queued
    write = completer.submit(Finish(lease=claimed.lease, status=JobStatus.SUCCEEDED))
    claim = asyncio.create_task(producer._claim(state, ["quick"], 4))
    try:
        await clock.run_until_idle()
        await clock.advance_async(LEASE - 1)
        assert not claim.done()
        await clock.advance_async(2)
        assert claim.done()
        assert claim.result() == 0
        error = write.exception()
        assert isinstance(error, StoreTimeout)
        assert f"TASKQ_LOCK_LEASE={LEASE:g}s" in str(error)
    finally:
        store.end.set()
        claim.cancel()
        await asyncio.gather(claim, return_exceptions=True)
