"""A real worker makes failed attempts visible: logged with their tracebacks, and stored."""

from __future__ import annotations

import pytest
from tests.integration.worker.failing_actors_fixture import Order, charge
from tests.integration.worker.support import Database, WorkerSpawner

from taskq import JobsClient, JobStatus

pytestmark = pytest.mark.integration

REGISTRY = "tests.integration.worker.failing_actors_fixture:registry"


async def test_failed_attempts_are_logged_and_kept_with_their_tracebacks(
    db: Database, client: JobsClient, workers: WorkerSpawner
) -> None:
    """An actor failing both its attempts logs a WARNING (with when it runs again) then an
    ERROR, each with its traceback in the JSON log, and JobsClient.attempts returns the
    same tracebacks; at DEBUG each attempt's start and end are logged too."""
    handle = await client.enqueue(charge, Order(order_id=42))
    worker = workers.start(
        db.worker_env(TASKQ_LOG_LEVEL="DEBUG"),
        "--until-idle",
        "--idle-max-runtime",
        "60",
        registry=REGISTRY,
    )
    code = await worker.wait(within=60)
    assert code == 3, worker.output_tail()  # until-idle with a failed job
    assert await handle.status() is JobStatus.FAILED

    records = [r for r in worker.log_records() if r.get("job_id") == handle.job_id]
    failures = [r for r in records if r["level"] in {"WARNING", "ERROR"}]
    assert [(r["level"], r["event"]) for r in failures] == [
        ("WARNING", "job-attempt-failed"),
        ("ERROR", "job-failed"),
    ], worker.output_tail()
    warning, error = failures
    for record, attempt in ((warning, 1), (error, 2)):
        assert (record["actor"], record["queue"]) == ("charge", "default")
        assert (record["attempt"], record["max_attempts"]) == (attempt, 2)
        assert record["error_class"] == "ConnectionError"
        tb = record["exception"]
        assert tb.startswith("Traceback (most recent call last):\n"), tb
        assert ", in _charge\n" in tb, tb
        assert "raise ConnectionError(" in tb, tb
        assert tb.endswith(f"refused order 42 (attempt {attempt})"), tb
    assert warning["error"] == "payment gateway refused order 42 (attempt 1)"
    assert "retry_at" in warning
    assert "retry_at" not in error
    assert error["error"].startswith("attempt 2 of 2 failed: ConnectionError: ")

    history = await client.attempts(handle.job_id)
    assert [(a.attempt, a.outcome, a.error_class) for a in history] == [
        (1, "retried", "ConnectionError"),
        (2, "failed", "ConnectionError"),
    ]
    assert [a.traceback for a in history] == [
        warning["exception"] + "\n",
        error["exception"] + "\n",
    ]
    for past in history:
        assert past.worker_id is not None
        assert past.started_at is not None
        assert past.started_at <= past.finished_at
    second_start = history[1].started_at
    assert second_start is not None
    assert second_start >= history[0].finished_at

    debug = [(r["event"], r.get("outcome")) for r in records if r["level"] == "DEBUG"]
    assert [d for d in debug if d[0] in {"job-started", "job-finished"}] == [
        ("job-started", None),
        ("job-finished", "retried"),
        ("job-started", None),
        ("job-finished", "failed"),
    ]
