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
from opentelemetry.util.types import Attributes

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
    """The instruments on one meter; the gauges observe :class:`Readings` at collection."""

    __slots__ = (
        "_group",
        "_readings",
        "attempt_duration",
        "attempts",
        "claim_batch",
        "claim_duration",
        "heartbeat_failures",
        "rate_limit_denials",
        "shutdown_duration",
        "sibling_crashes",
        "watchdog_trips",
    )

    def __init__(self, meter: Meter, readings: Readings, group: str) -> None:
        self._readings = readings
        self._group = group
        self.attempts = _counter(meter, m.ATTEMPTS)
        self.attempt_duration = _histogram(meter, m.ATTEMPT_DURATION)
        self.claim_duration = _histogram(meter, m.CLAIM_DURATION)
        self.claim_batch = _histogram(meter, m.CLAIM_BATCH)
        self.heartbeat_failures = _counter(meter, m.HEARTBEAT_FAILURES)
        self.rate_limit_denials = _counter(meter, m.RATE_LIMIT_DENIALS)
        self.watchdog_trips = _counter(meter, m.WATCHDOG_TRIPS)
        self.sibling_crashes = _counter(meter, m.SIBLING_CRASHES)
        self.shutdown_duration = _histogram(meter, m.SHUTDOWN_DURATION)
        gauges: dict[m.Metric, Callable[[], Iterable[tuple[float, Attributes]]]] = {
            m.LOCAL_QUEUE: self._local_queue,
            m.LOOP_TICK_AGE: self._tick_ages,
            m.QUEUE_JOBS: self._queue_jobs,
            m.QUEUE_OLDEST_PENDING_AGE: self._oldest_pending,
            m.ACTIVE_JOBS: self._active_jobs,
            m.IS_LEADER: self._is_leader,
        }
        for metric, read in gauges.items():
            meter.create_observable_gauge(
                metric.otel, [_observing(read)], unit=metric.unit, description=metric.help
            )

    def __repr__(self) -> str:
        return f"<OtelMeters group={self._group!r}>"

    def attributes(self, **labels: str) -> dict[str, str]:
        """The attributes of a measurement with ``labels`` (catalogue names), group included."""
        found = {m.OTEL_LABELS[name]: value for name, value in labels.items()}
        found[m.GROUP_ATTRIBUTE] = self._group
        return found

    def _local_queue(self) -> Iterable[tuple[float, Attributes]]:
        view = self._readings.view
        return [] if view is None else [(view.local_queue_jobs(), self.attributes())]

    def _active_jobs(self) -> Iterable[tuple[float, Attributes]]:
        view = self._readings.view
        return [] if view is None else [(view.active_jobs(), self.attributes())]

    def _is_leader(self) -> Iterable[tuple[float, Attributes]]:
        view = self._readings.view
        return [] if view is None else [(int(view.is_leader()), self.attributes())]

    def _tick_ages(self) -> Iterable[tuple[float, Attributes]]:
        view = self._readings.view
        if view is None:
            return []
        return [(age, self.attributes(loop=loop)) for loop, age in view.tick_ages().items()]

    def _queue_jobs(self) -> Iterable[tuple[float, Attributes]]:
        return [
            (count, self.attributes(queue=queue, status=status))
            for queue, status, count in self._readings.queue_jobs()
        ]

    def _oldest_pending(self) -> Iterable[tuple[float, Attributes]]:
        return [
            (age, self.attributes(queue=queue))
            for queue, age in self._readings.oldest_pending_ages()
        ]


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


def _observing(
    read: Callable[[], Iterable[tuple[float, Attributes]]],
) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def callback(_: CallbackOptions) -> Iterable[Observation]:
        return [Observation(value, attributes) for value, attributes in read()]

    return callback


__all__ = ["OtelMeters", "resolve_meter"]
