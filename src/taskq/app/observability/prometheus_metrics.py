"""The worker's metrics on a Prometheus ``CollectorRegistry`` (what ``/metrics`` renders).

The job path's counters and histograms (attempts, their durations, claims)
are lock-free cells (``hot_cells``); the rare events' are ``prometheus_client``
metrics, safe from any thread (a watchdog trip comes from the loop-lag
thread); the gauges are one collector that reads :class:`Readings` when the
registry is scraped, so nothing on the job path keeps them up to date.

No family has a ``_created`` series: the cells have none, and the
``prometheus_client`` metrics are registered on no registry but rendered
through :class:`WithoutCreated`, which leaves theirs out. That is per
registry: the process-wide switch (``disable_created_metrics``), which an
application may rely on for its own metrics, is never touched.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric as PromMetric
from prometheus_client.registry import Collector

from taskq.app.observability import metric_names as m
from taskq.app.observability.hot_cells import CellsCollector, CounterCells, HistogramCells
from taskq.app.observability.readings import Readings


class PrometheusMetrics:
    """The counters and histograms, registered on ``registry`` with the scrape-time gauges."""

    __slots__ = (
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

    def __init__(self, registry: CollectorRegistry, readings: Readings) -> None:
        self.attempts = CounterCells(m.ATTEMPTS)
        self.attempt_duration = HistogramCells(m.ATTEMPT_DURATION)
        self.claim_duration = HistogramCells(m.CLAIM_DURATION)
        self.claim_batch = HistogramCells(m.CLAIM_BATCH)
        registry.register(
            CellsCollector(
                (self.attempts, self.attempt_duration, self.claim_duration, self.claim_batch)
            )
        )
        self.heartbeat_failures = _counter(m.HEARTBEAT_FAILURES)
        self.rate_limit_denials = _counter(m.RATE_LIMIT_DENIALS)
        self.watchdog_trips = _counter(m.WATCHDOG_TRIPS)
        self.sibling_crashes = _counter(m.SIBLING_CRASHES)
        self.shutdown_duration = _histogram(m.SHUTDOWN_DURATION)
        registry.register(
            WithoutCreated(
                (
                    self.heartbeat_failures,
                    self.rate_limit_denials,
                    self.watchdog_trips,
                    self.sibling_crashes,
                    self.shutdown_duration,
                )
            )
        )
        registry.register(ScrapeGauges(readings))

    def __repr__(self) -> str:
        return "<PrometheusMetrics>"


def _counter(metric: m.Metric) -> Counter:
    return Counter(metric.prometheus, metric.help, metric.labels, registry=None)


def _histogram(metric: m.Metric) -> Histogram:
    return Histogram(
        metric.prometheus, metric.help, metric.labels, registry=None, buckets=metric.buckets
    )


class WithoutCreated(Collector):
    """``prometheus_client`` metrics (thread-safe, for the rare events) rendered without
    their ``_created`` series, as the job path's cells are: one shape for every family."""

    def __init__(self, metrics: Sequence[Collector]) -> None:
        self._metrics = metrics

    def __repr__(self) -> str:
        return f"<WithoutCreated {len(self._metrics)} metrics>"

    def describe(self) -> Iterator[PromMetric]:
        return self.collect()

    def collect(self) -> Iterator[PromMetric]:
        for metric in self._metrics:
            for family in metric.collect():
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
                yield family


class ScrapeGauges(Collector):
    """The gauges, read from :class:`Readings` at each scrape."""

    def __init__(self, readings: Readings) -> None:
        self._readings = readings

    def __repr__(self) -> str:
        return f"<ScrapeGauges {self._readings!r}>"

    def describe(self) -> Iterator[PromMetric]:
        # Names only (the registry's duplicate check), without reading the worker.
        yield from self._families()

    def collect(self) -> Iterator[PromMetric]:
        readings = self._readings
        local, ticks, depths, ages = self._families()
        view = readings.view
        if view is not None:
            local.add_metric([], view.local_queue_jobs())
            for loop, age in sorted(view.tick_ages().items()):
                ticks.add_metric([loop], age)
        for queue, status, count in readings.queue_jobs():  # 0s included: see Readings
            depths.add_metric([queue, status], count)
        for queue, age in readings.oldest_pending_ages():
            ages.add_metric([queue], age)
        yield local
        yield ticks
        yield depths
        yield ages

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return tuple(
            GaugeMetricFamily(metric.prometheus, metric.help, labels=metric.labels)
            for metric in (m.LOCAL_QUEUE, m.LOOP_TICK_AGE, m.QUEUE_JOBS, m.QUEUE_OLDEST_PENDING_AGE)
        )


__all__ = ["PrometheusMetrics", "ScrapeGauges", "WithoutCreated"]
