"""Every row of the metric table is exported by both backends: on /metrics and as an
OpenTelemetry instrument, under the table's names, help and kind."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.metrics.export import Gauge, Histogram, Sum
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from tests.metrics import MetricRecorder, metric_recording

from taskq.app.observability import metric_names as m
from taskq.app.observability.gauges import register_worker_gauges
from taskq.app.observability.health_view import WorkerSnapshot
from taskq.app.observability.metrics import WorkerMetrics, new_metrics_registry
from taskq.domain.status import JobStatus
from taskq.ports.store_params import QueueDepth

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class View:
    """A worker with something in every gauge."""

    def local_queue_jobs(self) -> int:
        return 2

    def active_jobs(self) -> int:
        return 3

    def is_leader(self) -> bool:
        return True

    def tick_ages(self) -> Mapping[str, float]:
        return {"heartbeat": 0.5}

    def now(self) -> datetime:
        return NOW


def snapshot() -> WorkerSnapshot:
    return WorkerSnapshot(
        active_jobs=3,
        is_leader=True,
        shutdown_phase=0,
        shutdown_phase_name=None,
        shutting_down=False,
        started=True,
        shutdown_elapsed_seconds=None,
    )


@pytest.fixture
def recorder() -> Iterator[MetricRecorder]:
    with metric_recording() as found:
        yield found


@pytest.fixture
def metrics(recorder: MetricRecorder) -> WorkerMetrics:
    """A worker's metrics after one of every event, with the health server's gauges."""
    metrics = WorkerMetrics(
        new_metrics_registry(), otel_enabled=True, group="g", meter_provider=recorder.provider
    )
    register_worker_gauges(metrics.registry, snapshot)
    metrics.watch(View())
    metrics.queue_depths_sampled(
        [
            QueueDepth(
                queue="mail",
                status=JobStatus.PENDING,
                count=1,
                oldest_due_at=NOW - timedelta(seconds=4),
            )
        ]
    )
    metrics.attempt_ended("ok", "default", "succeeded", 0.01)
    metrics.claimed(0.002, 1)
    metrics.heartbeat_failed()
    metrics.rate_limit_denied("ok", "rate-limited")
    metrics.watchdog_tripped("loop_lag")
    metrics.sibling_crashed("heartbeat")
    metrics.shutdown_took(1.5)
    return metrics


def test_the_table_names_each_metric_once() -> None:
    names = [metric.name for metric in m.METRICS]
    assert len(names) == len(set(names))
    assert m.ATTEMPTS in m.METRICS
    assert m.IS_LEADER in m.METRICS


def test_every_row_is_on_the_prometheus_registry(metrics: WorkerMetrics) -> None:
    text = generate_latest(metrics.registry).decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    for metric in m.METRICS:
        # The parser names a counter's family without its ``_total``.
        name = metric.prometheus.removesuffix("_total") if metric.kind == "counter" else None
        family = families.get(name or metric.prometheus)
        assert family is not None, metric.prometheus
        assert family.type == metric.kind, metric.prometheus
        assert family.samples, metric.prometheus
        if metric.on_metrics:
            assert family.documentation == metric.help
            for sample in family.samples:
                assert set(sample.labels) - {"le"} == set(metric.labels), metric.prometheus


def test_every_row_is_an_opentelemetry_instrument(
    metrics: WorkerMetrics, recorder: MetricRecorder
) -> None:
    assert metrics.otel is not None
    data = recorder.reader.get_metrics_data()
    assert data is not None
    found = {
        metric.name: metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    kinds = {"counter": Sum, "histogram": Histogram, "gauge": Gauge}
    for metric in m.METRICS:
        instrument = found.get(metric.otel)
        assert instrument is not None, metric.otel
        assert instrument.description == metric.help
        assert instrument.unit == metric.unit
        assert isinstance(instrument.data, kinds[metric.kind]), metric.otel
        for point in instrument.data.data_points:
            labels = {m.OTEL_LABELS[label] for label in metric.labels}
            assert set(point.attributes or {}) == labels | {m.GROUP_ATTRIBUTE}, metric.otel
