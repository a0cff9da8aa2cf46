"""Reading a worker's metrics in tests: Prometheus text parsed back, OTel points collected."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families


def scrape(registry: CollectorRegistry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of ``registry`` as /metrics renders it, parsed back:
    ``{(sample name, labels): value}``."""
    text = generate_latest(registry).decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(
    samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float | None:
    return samples.get((name, frozenset(labels.items())))


class MetricRecorder:
    """An SDK meter provider (``provider``) whose points the test collects on demand."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])

    def points(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """``{instrument name: [(attributes, point)]}`` of one collection."""
        found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        found.setdefault(metric.name, []).append(
                            (dict(point.attributes or {}), point)
                        )
        return found

    def shutdown(self) -> None:
        self.provider.shutdown()


def number(point: Any) -> float:
    assert isinstance(point, NumberDataPoint)
    return point.value


def histogram(point: Any) -> HistogramDataPoint:
    assert isinstance(point, HistogramDataPoint)
    return point


@contextmanager
def metric_recording() -> Iterator[MetricRecorder]:
    recorder = MetricRecorder()
    try:
        yield recorder
    finally:
        recorder.shutdown()
