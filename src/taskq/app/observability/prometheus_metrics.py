"""The worker's metrics on a Prometheus ``CollectorRegistry`` (what ``/metrics`` renders).

Every instrument is made from the table (``metric_names.METRICS``). The job
path's counters and histograms (its ``hot`` rows) are lock-free cells
(``hot_cells``); the rare events' are ``prometheus_client`` metrics, safe from
any thread (a watchdog trip comes from the loop-lag thread); the gauges are one
collector that reads :class:`Readings` when the registry is scraped, so nothing
on the job path keeps them up to date.

No family has a ``_created`` series: the cells have none, and the
``prometheus_client`` metrics are registered on no registry but rendered
through :class:`WithoutCreated`, which leaves theirs out. That is per
registry: the process-wide switch (``disable_created_metrics``), which an
application may rely on for its own metrics, is never touched.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric as PromMetric
from prometheus_client.registry import Collector

from taskq.app.observability import metric_names as m
from taskq.app.observability.hot_cells import CellsCollector, CounterCells, HistogramCells
from taskq.app.observability.readings import Readings


class PrometheusMetrics:
    """Every counter and histogram of :data:`~.metric_names.METRICS`, registered on
    ``registry`` with the scrape-time gauges; each found by its row."""

    __slots__ = ("_cells", "_metrics")

    def __init__(self, registry: CollectorRegistry, readings: Readings) -> None:
        self._cells: dict[str, CounterCells | HistogramCells] = {}
        self._metrics: dict[str, Counter | Histogram] = {}
        for metric in m.METRICS:
            if metric.kind == "counter":
                if metric.hot:
                    self._cells[metric.name] = CounterCells(metric)
                else:
                    self._metrics[metric.name] = _counter(metric)
            elif metric.kind == "histogram":
                if metric.hot:
                    self._cells[metric.name] = HistogramCells(metric)
                else:
                    self._metrics[metric.name] = _histogram(metric)
        registry.register(CellsCollector(tuple(self._cells.values())))
        registry.register(WithoutCreated(tuple(self._metrics.values())))
        registry.register(ScrapeGauges(readings))

    def __repr__(self) -> str:
        return "<PrometheusMetrics>"

    def counter_cells(self, metric: m.Metric) -> CounterCells:
        """A hot counter's cells."""
        found = self._cells[metric.name]
        assert isinstance(found, CounterCells), metric
        return found

    def histogram_cells(self, metric: m.Metric) -> HistogramCells:
        """A hot histogram's cells."""
        found = self._cells[metric.name]
        assert isinstance(found, HistogramCells), metric
        return found

    def counter(self, metric: m.Metric) -> Counter:
        """A rare event's counter."""
        found = self._metrics[metric.name]
        assert isinstance(found, Counter), metric
        return found

    def histogram(self, metric: m.Metric) -> Histogram:
        """A rare event's histogram."""
        found = self._metrics[metric.name]
        assert isinstance(found, Histogram), metric
        return found


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
    """The gauges of :data:`~.metric_names.METRICS` on ``/metrics``, read from
    :class:`Readings` at each scrape."""

    def __init__(self, readings: Readings) -> None:
        self._readings = readings

    def __repr__(self) -> str:
        return f"<ScrapeGauges {self._readings!r}>"

    def describe(self) -> Iterator[PromMetric]:
        # Names only (the registry's duplicate check), without reading the worker.
        for metric in _GAUGES:
            yield _family(metric)

    def collect(self) -> Iterator[PromMetric]:
        readings = self._readings
        for metric in _GAUGES:
            family = _family(metric)
            for labels, value in readings.gauge(metric):
                family.add_metric(list(labels), value)
            yield family


#: The gauges ``/metrics`` shows from the table (the others are the health server's).
_GAUGES: Final = tuple(g for g in m.METRICS if g.kind == "gauge" and g.on_metrics)


def _family(metric: m.Metric) -> GaugeMetricFamily:
    return GaugeMetricFamily(metric.prometheus, metric.help, labels=metric.labels)


__all__ = ["PrometheusMetrics", "ScrapeGauges", "WithoutCreated"]
