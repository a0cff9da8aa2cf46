"""The worker's metrics as OpenTelemetry instruments, through ``opentelemetry-api`` only.

As with spans (``tracing``), the SDK, its readers and exporters are the
application's: TaskQ asks the global meter provider (or the one the worker
was given) for a meter, and creates no instrument at all while that provider
is the API's default (no SDK configured) or ``TASKQ_OTEL_ENABLED`` is false.
Every measurement carries the worker group (``TASKQ_WORKER_GROUP``) as
``messaging.consumer.group.name``, as the CONSUMER spans do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry import metrics
from opentelemetry.metrics import (
    CallbackOptions,
    Counter,
    Histogram,
    Meter,
    MeterProvider,
    NoOpMeter,
    NoOpMeterProvider,
    Observation,
)
from opentelemetry.metrics._internal import _ProxyMeterProvider

from taskq.app.observability import metric_names as m
from taskq.app.observability.readings import Readings
from taskq.app.observability.tracing import SCOPE


def resolve_meter(provider: MeterProvider | None) -> Meter | None:
    """A meter from ``provider`` (default: the global one), or None when no SDK is behind it:
    the API's proxy and no-op providers, or an SDK disabled by ``OTEL_SDK_DISABLED``."""
    found = provider if provider is not None else metrics.get_meter_provider()
    # The proxy is what the API hands out before an SDK is set (unlike the tracer's, its
    # class is not public): instruments made through it would cost a call per job for nothing.
    if isinstance(found, NoOpMeterProvider | _ProxyMeterProvider):
        return None
    meter = found.get_meter(SCOPE, _version())
    return None if isinstance(meter, NoOpMeter) else meter


def _version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("taskq")
    except metadata.PackageNotFoundError:
        return None


class OtelMeters:
    """Every instrument of :data:`~.metric_names.METRICS` on one meter, each found by its
    row; the gauges observe :class:`Readings` at collection."""

    __slots__ = ("_counters", "_group", "_histograms", "_readings")

    def __init__(self, meter: Meter, readings: Readings, group: str) -> None:
        self._readings = readings
        self._group = group
        self._counters: dict[str, Counter] = {}
        self._histograms: dict[str, Histogram] = {}
        for metric in m.METRICS:
            if metric.kind == "counter":
                self._counters[metric.name] = _counter(meter, metric)
            elif metric.kind == "histogram":
                self._histograms[metric.name] = _histogram(meter, metric)
            else:
                meter.create_observable_gauge(
                    metric.otel,
                    [self._observing(metric)],
                    unit=metric.unit,
                    description=metric.help,
                )

    def __repr__(self) -> str:
        return f"<OtelMeters group={self._group!r}>"

    def counter(self, metric: m.Metric) -> Counter:
        return self._counters[metric.name]

    def histogram(self, metric: m.Metric) -> Histogram:
        return self._histograms[metric.name]

    def attributes(self, **labels: str) -> dict[str, str]:
        """The attributes of a measurement with ``labels`` (catalogue names), group included."""
        found = {m.OTEL_LABELS[name]: value for name, value in labels.items()}
        found[m.GROUP_ATTRIBUTE] = self._group
        return found

    def _observing(self, metric: m.Metric) -> Callable[[CallbackOptions], Iterable[Observation]]:
        """The callback observing gauge ``metric``'s readings, with its labels' attributes."""
        names = metric.labels
        readings = self._readings

        def callback(_: CallbackOptions) -> Iterable[Observation]:
            return [
                Observation(value, self.attributes(**dict(zip(names, labels, strict=True))))
                for labels, value in readings.gauge(metric)
            ]

        return callback


def _counter(meter: Meter, metric: m.Metric) -> Counter:
    return meter.create_counter(metric.otel, unit=metric.unit, description=metric.help)


def _histogram(meter: Meter, metric: m.Metric) -> Histogram:
    # The SDK's default buckets are for milliseconds; these are in seconds.
    return meter.create_histogram(
        metric.otel,
        unit=metric.unit,
        description=metric.help,
        explicit_bucket_boundaries_advisory=metric.buckets,
    )


__all__ = ["OtelMeters", "resolve_meter"]
