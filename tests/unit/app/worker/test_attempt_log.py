"""The worker's records of each attempt (attempt_log): failures always, starts and ends at DEBUG."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import WorkerRun, events_named, fields, job

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.client import JobsClient
from taskq.app.worker import events
from taskq.app.worker.events import LOGGER_NAME
from taskq.app.worker.protocols import ActorLike
from taskq.domain.outcomes import Snooze
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus


class Item(BaseModel):
    n: int


def _connect(n: int) -> None:
    raise ConnectionError(f"refused #{n}")


@actor(retry=RetryPolicy(max_attempts=2, base=timedelta(seconds=10), jitter=0.0))
async def fetch(payload: Item) -> None:
    _connect(payload.n)


@actor(retry=RetryPolicy(kind="non_retryable"))
async def once(payload: Item) -> None:
    _connect(payload.n)


@actor(retry=RetryPolicy(kind="indefinite", base=timedelta(seconds=10), jitter=0.0))
async def forever(payload: Item) -> None:
    _connect(payload.n)


@actor
async def fine(payload: Item) -> int:
    return payload.n


SNOOZED: set[int] = set()


@actor
async def drowsy(payload: Item) -> int:
    if payload.n not in SNOOZED:
        SNOOZED.add(payload.n)
        raise Snooze(timedelta(seconds=5))
    return payload.n


REGISTRY: dict[str, ActorLike] = {
    "fetch": fetch,
    "once": once,
    "forever": forever,
    "fine": fine,
    "drowsy": drowsy,
}


@pytest.fixture(autouse=True)
def _reset() -> None:
    SNOOZED.clear()


def _levels(caplog: pytest.LogCaptureFixture, job_id: int) -> list[tuple[str, str]]:
    """(level, event) of every worker record about ``job_id``, oldest first."""
    return [
        (r.levelname, getattr(r, "event", ""))
        for r in caplog.records
        if r.name == LOGGER_NAME and getattr(r, "fields", {}).get("job_id") == job_id
    ]


async def _started(backend: MemoryBackend, clock: FakeClock) -> WorkerRun:
    run = WorkerRun(backend, clock, REGISTRY)
    await run.start()
    return run


async def test_a_retried_error_is_a_warning_then_the_last_one_an_error(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each failed attempt is logged with its traceback: WARNING with when it runs again
    while attempts remain, ERROR when the job fails for good; the history keeps the same
    tracebacks."""
    job_id = (await client.enqueue(fetch.new_job({"n": 7}, now=clock.now()))).job_id
    run = await _started(backend, clock)
    [warning] = events_named(caplog, events.JOB_ATTEMPT_FAILED)
    assert warning.levelno == logging.WARNING
    retry_at = (await job(client, job_id)).scheduled_at
    assert fields(warning) == {
        "job_id": job_id,
        "actor": "fetch",
        "queue": "default",
        "attempt": 1,
        "max_attempts": 2,
        "error_class": "ConnectionError",
        "error": "refused #7",
        "retry_at": retry_at.isoformat(),
    }
    assert warning.exc_text is not None
    assert 'raise ConnectionError(f"refused #{n}")' in warning.exc_text
    assert warning.exc_text.endswith("ConnectionError: refused #7")
    assert events_named(caplog, events.JOB_FAILED) == []

    await run.advance(11)
    [error] = events_named(caplog, events.JOB_FAILED)
    assert error.levelno == logging.ERROR
    assert {k: v for k, v in fields(error).items() if k != "error"} == {
        "job_id": job_id,
        "actor": "fetch",
        "queue": "default",
        "attempt": 2,
        "max_attempts": 2,
        "error_class": "ConnectionError",
    }
    assert fields(error)["error"] == "attempt 2 of 2 failed: ConnectionError: refused #7"
    assert error.exc_text is not None
    assert "in _connect" in error.exc_text
    assert (await job(client, job_id)).status is JobStatus.FAILED

    history = await JobsClient(client).attempts(job_id)
    assert [(a.outcome, a.worker_id) for a in history] == [
        ("retried", run.state.worker_id),
        ("failed", run.state.worker_id),
    ]
    assert [a.traceback.rstrip("\n") if a.traceback else None for a in history] == [
        warning.exc_text,
        error.exc_text,
    ]
    assert all(isinstance(a.started_at, datetime) for a in history)
    assert await run.stop() == 0


async def test_a_non_retryable_error_is_one_error_record(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A job that may not retry logs its first failure once, at ERROR, with max_attempts 1."""
    job_id = (await client.enqueue(once.new_job({"n": 1}, now=clock.now()))).job_id
    run = await _started(backend, clock)
    assert [e for e in _levels(caplog, job_id) if e[0] != "DEBUG"] == [("ERROR", "job-failed")]
    [error] = events_named(caplog, events.JOB_FAILED)
    assert (fields(error)["attempt"], fields(error)["max_attempts"]) == (1, 1)
    assert error.exc_text is not None
    assert "ConnectionError: refused #1" in error.exc_text
    await run.stop()


async def test_an_unbounded_policy_names_no_max_attempts(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An indefinite policy's warning has no max_attempts (there is none)."""
    await client.enqueue(forever.new_job({"n": 2}, now=clock.now()))
    run = await _started(backend, clock)
    [warning] = events_named(caplog, events.JOB_ATTEMPT_FAILED)
    assert "max_attempts" not in fields(warning)
    assert fields(warning)["attempt"] == 1
    await run.stop()


async def test_an_invalid_payload_fails_at_error_without_a_traceback(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A payload that does not validate fails for good: an ERROR naming the validation
    error, with no traceback (nothing was raised by the actor)."""
    job = fine.new_job({"n": 1}, now=clock.now())
    bad = type(job)(**{**{f: getattr(job, f) for f in job.__dataclass_fields__}, "payload": {}})
    job_id = (await client.enqueue(bad)).job_id
    run = await _started(backend, clock)
    [error] = events_named(caplog, events.JOB_FAILED)
    assert (fields(error)["job_id"], fields(error)["error_class"]) == (
        job_id,
        "PayloadValidationError",
    )
    assert error.exc_text is None
    await run.stop()


async def test_a_success_logs_only_its_start_and_end_at_debug(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A job that succeeds: job-started and job-finished at DEBUG, nothing above."""
    job_id = (await client.enqueue(fine.new_job({"n": 3}, now=clock.now()))).job_id
    run = await _started(backend, clock)
    assert _levels(caplog, job_id) == [("DEBUG", "job-started"), ("DEBUG", "job-finished")]
    [start] = events_named(caplog, events.JOB_STARTED)
    assert fields(start) == {"job_id": job_id, "actor": "fine", "queue": "default", "attempt": 1}
    [end] = events_named(caplog, events.JOB_FINISHED)
    assert fields(end)["outcome"] == "succeeded"
    assert fields(end)["max_attempts"] == 3
    assert isinstance(fields(end)["duration_seconds"], float)
    await run.stop()


async def test_a_snooze_is_no_failure(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A Snooze is a request, not an error: no WARNING, and job-finished says snoozed."""
    job_id = (await client.enqueue(drowsy.new_job({"n": 4}, now=clock.now()))).job_id
    run = await _started(backend, clock)
    assert _levels(caplog, job_id) == [("DEBUG", "job-started"), ("DEBUG", "job-finished")]
    assert fields(events_named(caplog, events.JOB_FINISHED)[0])["outcome"] == "snoozed"
    await run.stop()


async def test_at_info_only_the_failures_are_logged(
    backend: MemoryBackend,
    clock: FakeClock,
    client: MemoryQueueStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With the worker logger above DEBUG a success leaves no record at all, and a failed
    attempt only its WARNING."""
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    ok = (await client.enqueue(fine.new_job({"n": 5}, now=clock.now()))).job_id
    failed = (await client.enqueue(fetch.new_job({"n": 6}, now=clock.now()))).job_id
    run = await _started(backend, clock)
    assert (await job(client, ok)).status is JobStatus.SUCCEEDED
    assert _levels(caplog, ok) == []
    assert _levels(caplog, failed) == [("WARNING", "job-attempt-failed")]
    await run.stop()


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Put the root logger back as it was (configure_logging changes it)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_a_formatted_traceback_is_rendered_as_an_exception(root_logging: None) -> None:
    """An event given a traceback text shows it as a logged exception would: the
    ``exception`` key in JSON, the lines after the record on a console."""
    tb = 'Traceback (most recent call last):\n  File "a.py", line 1, in f\nOSError: no\n'
    for log_format in ("json", "console"):
        out = io.StringIO()
        events.configure_logging(log_format=log_format, level="INFO", stream=out)
        events.emit(events.JOB_FAILED, logging.ERROR, traceback=tb, job_id=1, actor="a")
        text = out.getvalue()
        if log_format == "json":
            body = json.loads(text)
            assert (body["event"], body["job_id"], body["exception"]) == (
                "job-failed",
                1,
                tb.rstrip("\n"),
            )
        else:
            first, *rest = text.rstrip("\n").split("\n")
            assert first.endswith('ERROR    job-failed  job_id=1  actor="a"')
            assert "\n".join(rest) == tb.rstrip("\n")
