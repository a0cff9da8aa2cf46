"""What an actor raises is an error of its job, never of the worker: SystemExit,
KeyboardInterrupt, other BaseExceptions, from async and sync actors; an exception
whose text cannot be read; a message of megabytes."""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import timedelta

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker.protocols import Registry
from taskq.domain.outcomes import MAX_ERROR_MESSAGE
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus


class Item(BaseModel):
    kind: str


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


class Custom(BaseException):
    pass


def _raise(kind: str) -> None:
    if kind == "sys.exit":
        sys.exit(3)
    if kind == "KeyboardInterrupt":
        raise KeyboardInterrupt
    if kind == "Custom":
        raise Custom("a BaseException of the application's")
    if kind == "Unprintable":
        raise Unprintable
    if kind == "huge":
        raise ValueError("x" * 1_000_000)


@actor(retry=RetryPolicy(kind="non_retryable"))
async def escapes(payload: Item) -> None:
    _raise(payload.kind)


@actor(retry=RetryPolicy(kind="non_retryable"))
def escapes_sync(payload: Item) -> None:
    _raise(payload.kind)


@actor
async def fine(payload: Item) -> str:
    return payload.kind


EXPECTED = {
    "sys.exit": ("SystemExit", "SystemExit: 3"),
    "KeyboardInterrupt": ("KeyboardInterrupt", "KeyboardInterrupt"),
    "Custom": ("Custom", "a BaseException of the application's"),
    "Unprintable": ("Unprintable", "<str() of this Unprintable raised RuntimeError>"),
}


@pytest.mark.parametrize("ref", [escapes, escapes_sync], ids=["async", "sync"])
async def test_what_an_actor_raises_fails_its_job_and_the_worker_goes_on(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore, ref: object
) -> None:
    """Each of these fails its own job with its class and text; a job enqueued after
    them all still runs, and the worker stops cleanly."""
    failing = {
        kind: (await client.enqueue(ref.new_job({"kind": kind}, now=clock.now()))).job_id  # type: ignore[attr-defined]
        for kind in EXPECTED
    }
    after = (await client.enqueue(fine.new_job({"kind": "after"}, now=clock.now()))).job_id
    registry: Registry = {"escapes": escapes, "escapes_sync": escapes_sync, "fine": fine}
    run = WorkerRun(backend, clock, registry, make_settings(max_concurrency=2))
    await run.start()
    ids = [*failing.values(), after]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        await run.advance(0.05)
        jobs = [await client.get(i) for i in ids]
        if all(j is not None and j.status.is_terminal for j in jobs):
            break
        await asyncio.sleep(0.005)  # sync jobs run in real threads: give them real time
    for kind, (error_class, text) in EXPECTED.items():
        stored = await client.get(failing[kind])
        assert stored is not None
        assert stored.status is JobStatus.FAILED, (kind, stored.status)
        assert text in (stored.last_error or ""), (kind, stored.last_error)
        (attempt,) = await client.attempts(failing[kind])
        assert attempt.error_class == error_class
    done = await client.get(after)
    assert done is not None
    assert done.status is JobStatus.SUCCEEDED
    assert await run.stop() == 0


async def test_a_huge_error_message_is_stored_cut(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    job_id = (await client.enqueue(escapes.new_job({"kind": "huge"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"escapes": escapes}, make_settings(max_concurrency=1))
    await run.start()
    await run.advance(1)
    stored = await client.get(job_id)
    assert stored is not None
    assert stored.status is JobStatus.FAILED
    error = stored.last_error or ""
    assert MAX_ERROR_MESSAGE < len(error) < MAX_ERROR_MESSAGE + 200
    assert error.count("x") == MAX_ERROR_MESSAGE
    assert "992,000 more characters cut" in error
    assert await run.stop() == 0


@actor(retry=RetryPolicy(max_attempts=2, base=timedelta(seconds=1), jitter=0.0))
async def leaks_cancel(payload: Item) -> None:
    raise asyncio.CancelledError  # as a library that leaks one would


async def test_a_cancelled_error_nobody_asked_for_is_an_error_and_retried(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """An actor that raises CancelledError with no cancel requested is not 'cancelled':
    the attempt failed, it is retried by its policy, and the job ends failed saying so."""
    job_id = (await client.enqueue(leaks_cancel.new_job({"kind": "x"}, now=clock.now()))).job_id
    run = WorkerRun(backend, clock, {"leaks_cancel": leaks_cancel}, make_settings())
    await run.start()
    for _ in range(10):
        await run.advance(1)
    stored = await client.get(job_id)
    assert stored is not None
    assert stored.status is JobStatus.FAILED
    assert "no cancel was requested" in (stored.last_error or "")
    assert [a.outcome for a in await client.attempts(job_id)] == ["retried", "failed"]
    assert await run.stop() == 0
