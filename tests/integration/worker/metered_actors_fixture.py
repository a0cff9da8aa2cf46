"""Actors for the cross-process metrics test, and the OpenTelemetry metrics SDK of the worker.

Imported by ``taskq worker --actors`` with ``METRICS_FILE`` set, this module configures the
process's global meter provider, as an application's actors module would (and as
docs/operations.md says to): a periodic reader whose exporter appends every data point as
one JSON line to that file, flushed when the worker's process exits. Imported without it
(by the test, for the actor refs), it configures nothing.
"""

from __future__ import annotations

import json
import os
from typing import Any

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    NumberDataPoint,
    PeriodicExportingMetricReader,
)
from pydantic import BaseModel

from taskq import RetryPolicy, actor

#: The environment variable naming the file the worker's data points go to.
METRICS_FILE = "METERED_METRICS_FILE"


def point_record(name: str, point: Any, export: int) -> dict[str, Any]:
    """What the test reads of one data point: its instrument, attributes and value."""
    record: dict[str, Any] = {
        "export": export,
        "name": name,
        "attributes": dict(point.attributes or {}),
    }
    if isinstance(point, HistogramDataPoint):
        record["count"], record["sum"] = point.count, point.sum
    elif isinstance(point, NumberDataPoint):
        record["value"] = point.value
    return record


class JsonLinesExporter(MetricExporter):
    """Appends each export's data points to a file (cumulative: the last export has totals)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path
        self._exports = 0

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self._exports += 1
        with open(self._path, "a", encoding="utf-8") as out:
            for resource in metrics_data.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        for point in metric.data.data_points:
                            record = point_record(metric.name, point, self._exports)
                            out.write(json.dumps(record) + "\n")
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


_path = os.environ.get(METRICS_FILE)
if _path:
    _reader = PeriodicExportingMetricReader(JsonLinesExporter(_path), export_interval_millis=60_000)
    metrics.set_meter_provider(MeterProvider(metric_readers=[_reader]))


class Step(BaseModel):
    n: int


@actor
async def counted(payload: Step) -> int:
    return payload.n


@actor(retry=RetryPolicy(kind="non_retryable"))
async def refused(payload: Step) -> None:
    raise PermissionError(f"step {payload.n} is not allowed")


registry = [counted, refused]
