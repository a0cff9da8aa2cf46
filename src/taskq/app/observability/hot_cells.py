"""Lock-free counters and histograms for the job path, rendered as Prometheus families.

``prometheus_client``'s metrics take a lock per update (they may be updated
from any thread): about 0.6 µs per counter increment and 0.8-1.4 µs per
histogram observation here. The per-job and per-claim metrics are only ever
updated on the worker's event loop, so they are plain cells: an integer add,
and a ``bisect`` into the bucket bounds. A scrape reads them (also on the
loop, through the health server; from another thread a scrape may see an
update half-done: a count one ahead of its sum, never a wrong total later).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric as PromMetric
from prometheus_client.registry import Collector

from taskq.app.observability.metric_names import Metric


class CountCell:
    """One counter series."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def __repr__(self) -> str:
        return f"<CountCell {self.value}>"


class HistogramCell:
    """One histogram series: per-bucket counts (the last one past every bound), sum, count."""

    __slots__ = ("_bounds", "buckets", "count", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self._bounds = bounds
        self.buckets = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def __repr__(self) -> str:
        return f"<HistogramCell count={self.count} sum={self.sum:g}>"

    def observe(self, value: float) -> None:
        # ``le`` buckets: the first bound >= value.
        self.buckets[bisect_left(self._bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, count)`` pairs as Prometheus wants them, +Inf last."""
        pairs: list[tuple[str, float]] = []
        total = 0
        for bound, count in zip(self._bounds, self.buckets, strict=False):
            total += count
            pairs.append((repr(float(bound)), total))
        pairs.append(("+Inf", total + self.buckets[-1]))
        return pairs


class CounterCells:
    """A labelled counter whose series are :class:`CountCell` objects, one per label values."""

    __slots__ = ("cells", "metric")

    def __init__(self, metric: Metric) -> None:
        self.metric = metric
        self.cells: dict[tuple[str, ...], CountCell] = {}

    def __repr__(self) -> str:
        return f"<CounterCells {self.metric.prometheus} series={len(self.cells)}>"

    def cell(self, *labels: str) -> CountCell:
        found = self.cells.get(labels)
        if found is None:
            found = self.cells[labels] = CountCell()
        return found

    def family(self) -> CounterMetricFamily:
        family = CounterMetricFamily(
            self.metric.prometheus, self.metric.help, labels=self.metric.labels
        )
        for labels, cell in list(self.cells.items()):
            family.add_metric(list(labels), cell.value)
        return family


class HistogramCells:
    """A labelled histogram whose series are :class:`HistogramCell` objects."""

    __slots__ = ("cells", "metric")

    def __init__(self, metric: Metric) -> None:
        self.metric = metric
        self.cells: dict[tuple[str, ...], HistogramCell] = {}

    def __repr__(self) -> str:
        return f"<HistogramCells {self.metric.prometheus} series={len(self.cells)}>"

    def cell(self, *labels: str) -> HistogramCell:
        found = self.cells.get(labels)
        if found is None:
            found = self.cells[labels] = HistogramCell(self.metric.buckets)
        return found

    def family(self) -> HistogramMetricFamily:
        family = HistogramMetricFamily(
            self.metric.prometheus, self.metric.help, labels=self.metric.labels
        )
        for labels, cell in list(self.cells.items()):
            family.add_metric(list(labels), cell.cumulative(), sum_value=cell.sum)
        return family


class CellsCollector(Collector):
    """Renders the cells on a scrape."""

    def __init__(self, metrics: Sequence[CounterCells | HistogramCells]) -> None:
        self._metrics = metrics

    def __repr__(self) -> str:
        return f"<CellsCollector {len(self._metrics)} metrics>"

    def describe(self) -> Iterator[PromMetric]:
        for metric in self._metrics:
            yield metric.family()

    def collect(self) -> Iterator[PromMetric]:
        for metric in self._metrics:
            yield metric.family()


__all__ = [
    "CellsCollector",
    "CountCell",
    "CounterCells",
    "HistogramCell",
    "HistogramCells",
]
