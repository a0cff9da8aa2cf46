"""The benchmarks' no-op actor, in a worker process with an OpenTelemetry metrics SDK.

``bench_metrics.py --drain`` loads it for its "SDK" arm (information only: the SDK is the
application's choice): a ``MeterProvider`` whose periodic reader hands every collection to
an exporter that drops it, so what is measured is TaskQ's recording and the SDK's
aggregation, not an export.
"""

from __future__ import annotations

from typing import Any

import noop_actors
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)


class DropMetrics(MetricExporter):
    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


metrics.set_meter_provider(
    MeterProvider(metric_readers=[PeriodicExportingMetricReader(DropMetrics())])
)

registry = noop_actors.registry
