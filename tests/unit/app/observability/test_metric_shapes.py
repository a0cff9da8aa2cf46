"""The shape of /metrics: no ``_created`` series on any family, and queue gauges that do
not vanish when a status empties."""

from __future__ import annotations

from datetime import UTC, datetime

import prometheus_client
from prometheus_client import generate_latest
from tests.metrics import scrape, value

from taskq.app.observability.metrics import WorkerMetrics, new_metrics_registry
from taskq.app.observability.readings import Readings
from taskq.domain.status import JobStatus
from taskq.ports.store_params import QueueDepth


def test_no_family_has_a_created_series_and_global_state_is_untouched() -> None:
    """The job path's cells have no ``_created``; the rare events' counters had one:
    now none does, without the process-wide switch an application may rely on."""
    own = prometheus_client.Counter("app_things_total", "An application's own counter.")
    try:
        metrics = WorkerMetrics(new_metrics_registry(), otel_enabled=False, group="g")
        metrics.prepare([("ok", "default")])
        metrics.attempt_ended("ok", "default", "succeeded", 0.01)
        metrics.claimed(0.002, 1)
        metrics.heartbeat_failed()
        metrics.rate_limit_denied("ok", "rate-limited")
        metrics.watchdog_tripped("loop_lag")
        metrics.sibling_crashed("heartbeat")
        metrics.shutdown_took(1.5)
        text = generate_latest(metrics.registry).decode()
        assert "_created" not in text
        samples = scrape(metrics.registry)
        assert value(samples, "taskq_heartbeat_failures_total") == 1
        assert value(samples, "taskq_shutdown_duration_seconds_count") == 1
        assert value(samples, "taskq_watchdog_trips_total", detector="loop_lag") == 1
        # The application's own counter still has its _created series.
        default = generate_latest(prometheus_client.REGISTRY).decode()
        assert "app_things_created" in default
    finally:
        prometheus_client.REGISTRY.unregister(own)


def _depth(queue: str, status: JobStatus, count: int) -> QueueDepth:
    return QueueDepth(
        queue=queue,
        status=status,
        count=count,
        oldest_due_at=datetime(2026, 1, 1, tzinfo=UTC) if status is JobStatus.PENDING else None,
    )


def test_a_status_that_empties_reads_zero_and_leadership_ending_clears_all() -> None:
    readings = Readings()
    readings.depths_sampled([_depth("mail", JobStatus.PENDING, 4)])
    assert sorted(readings.queue_jobs()) == [
        ("mail", "pending", 4),
        ("mail", "running", 0),
        ("mail", "scheduled", 0),
    ]
    readings.depths_sampled([_depth("other", JobStatus.RUNNING, 1)])  # mail emptied
    assert sorted(readings.queue_jobs()) == [
        ("mail", "pending", 0),
        ("mail", "running", 0),
        ("mail", "scheduled", 0),
        ("other", "pending", 0),
        ("other", "running", 1),
        ("other", "scheduled", 0),
    ]
    readings.depths_cleared()
    assert readings.queue_jobs() == []
