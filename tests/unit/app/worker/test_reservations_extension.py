"""A rate limiter that stops answering never holds up the heartbeat (fake clock).

Every beat extends the worker's reservation leases (``RateLimiter.extend``) beside
the heartbeat call. A limiter that hangs (Redis behind a silent partition) is
given up after ``TASKQ_HEARTBEAT_COMMAND_TIMEOUT`` and logged; the jobs' leases
are extended on time all the same.
"""

from __future__ import annotations

import asyncio
import gc
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, events_named, fields, job, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker import events
from taskq.domain.errors import RateLimitUnavailable
from taskq.domain.status import JobStatus

RELEASE = asyncio.Event()


class Task(BaseModel):
    name: str


@pytest.fixture(autouse=True)
def _reset() -> None:
    global RELEASE
    RELEASE = asyncio.Event()


@actor
async def blocker(payload: Task) -> str:
    await RELEASE.wait()
    return "done"


class SlowLimiter:
    """The memory limiter, but ``extend`` answers only after ``delay`` seconds of the fake
    clock (None: never, and, as on a dead socket, its cancellation is not acknowledged
    until the test ends)."""

    def __init__(self, inner: Any, clock: FakeClock, delay: float | None) -> None:
        self._inner = inner
        self._clock = clock
        self.delay = delay
        self.end = asyncio.Event()
        self.calls: list[datetime] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def extend(self, holder: str, *, lease: timedelta, now: datetime | None = None) -> int:
        self.calls.append(self._clock.now())
        if self.delay is not None:
            await self._clock.sleep(self.delay)
            extended: int = await self._inner.extend(holder, lease=lease)
            return extended
        while not self.end.is_set():
            try:
                await self.end.wait()
            except asyncio.CancelledError:
                continue  # a cancel request that is never acknowledged
        raise ConnectionResetError("gone")


SETTINGS = {
    "heartbeat_interval": 10,
    "heartbeat_command_timeout": 5,
    "lock_lease": 40,
    "cancellation_grace_period": 10,
}


async def test_a_hanging_rate_limiter_does_not_delay_the_leases(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Beats every 10 s extend the job's 40 s lease on time while the reservations'
    extension hangs: it is logged after 5 s (heartbeat-failed, part reservations),
    given up after the 40 s lease and started again by the next beat; the job is never
    reclaimed, runs once and succeeds."""
    limiter = SlowLimiter(backend.rate_limiter(), clock, delay=None)
    job_id = (await client.enqueue(blocker.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(
        backend, clock, {"blocker": blocker}, make_settings(**SETTINGS), rate_limiter=limiter
    )
    began = clock.now()
    try:
        await run.start()
        first = await job(client, job_id)
        for beat in range(1, 13):
            await run.advance(10)
            now = await job(client, job_id)
            assert now.status is JobStatus.RUNNING
            assert now.fencing_token == first.fencing_token
            # Extended by this beat, at its due time.
            assert now.lock_expires_at == clock.now() + timedelta(seconds=40), beat
        # One call at a time: the beats at 10, 50 and 90 s (each given up 40 s later).
        assert [call - began for call in limiter.calls] == [
            timedelta(seconds=s) for s in (10, 50, 90)
        ]
        failed = events_named(caplog, events.HEARTBEAT_FAILED)
        assert len(failed) == 3
        assert {fields(r)["part"] for r in failed} == {"reservations"}
        assert "within TASKQ_HEARTBEAT_COMMAND_TIMEOUT=5s" in fields(failed[0])["error"]
        assert events_named(caplog, events.WORKER_ISOLATED) == []
        assert events_named(caplog, events.LEASES_RECLAIMED) == []
        RELEASE.set()
        await clock.run_until_idle()
        done = await job(client, job_id)
        assert (done.status, done.attempt) == (JobStatus.SUCCEEDED, 1)
        assert await run.stop() == 0
    finally:
        limiter.end.set()


async def test_a_late_answer_still_extends_the_reservations(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An extension answered after 8 s (past the 5 s timeout: a Redis that stopped
    answering, then the Postgres fallback) is logged once and still extends the
    worker's reservation; the job's lease is extended at every beat meanwhile."""
    inner = backend.rate_limiter()
    limiter = SlowLimiter(inner, clock, delay=8)
    job_id = (await client.enqueue(blocker.new_job({"name": "x"}, now=clock.now()))).job_id
    run = WorkerRun(
        backend, clock, {"blocker": blocker}, make_settings(**SETTINGS), rate_limiter=limiter
    )
    await run.start()
    held = await inner.reserve(
        "reservation:k", capacity=1, holder=run.state.worker_id, lease=timedelta(seconds=40)
    )
    assert held is not None
    for _ in range(6):
        await run.advance(10)
        assert (await job(client, job_id)).lock_expires_at == clock.now() + timedelta(seconds=40)
    # Past the reservation's first 40 s: the late answers kept it.
    assert await inner.reserve("reservation:k", capacity=1, holder="other", lease=WINDOW) is None
    failed = events_named(caplog, events.HEARTBEAT_FAILED)
    assert 3 <= len(failed) <= len(limiter.calls)  # one line per late call at most
    assert {fields(r)["part"] for r in failed} == {"reservations"}
    RELEASE.set()
    await clock.run_until_idle()
    assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert await run.stop() == 0


WINDOW = timedelta(seconds=60)


class FailingLimiter(SlowLimiter):
    """``extend`` fails after ``delay`` seconds of the fake clock, as the Postgres limiter
    does after its own 10 s timeout on a dead network."""

    async def extend(self, holder: str, *, lease: timedelta, now: datetime | None = None) -> int:
        self.calls.append(self._clock.now())
        await self._clock.sleep(self.delay or 0.0)
        raise RateLimitUnavailable("postgres rate limiter failed: TimeoutError()")


@pytest.mark.parametrize("delay", [2.0, 8.0])
async def test_a_failing_extension_leaves_no_exception_unretrieved(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
    delay: float,
) -> None:
    """Extensions that fail before the 5 s timeout (logged as they fail) or after it (the
    Postgres limiter's own 10 s timeout on a dead network, after the one line saying it is
    late) leave nothing for asyncio to report: before, each late failure was logged at exit
    as "Task exception was never retrieved", twice per exit after an outage."""
    unretrieved: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: unretrieved.append(context))
    try:
        limiter = FailingLimiter(backend.rate_limiter(), clock, delay=delay)
        await client.enqueue(blocker.new_job({"name": "x"}, now=clock.now()))
        run = WorkerRun(
            backend, clock, {"blocker": blocker}, make_settings(**SETTINGS), rate_limiter=limiter
        )
        await run.start()
        for _ in range(4):
            await run.advance(10)
        assert len(limiter.calls) >= 3
        RELEASE.set()
        await clock.run_until_idle()
        assert await run.stop() == 0
        await clock.advance_async(60)  # anything still pending ends
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert [c.get("message") for c in unretrieved] == []
    failed = events_named(caplog, events.HEARTBEAT_FAILED)
    assert failed
    assert {fields(r)["part"] for r in failed} == {"reservations"}
