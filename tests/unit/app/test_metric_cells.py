"""The job path's lock-free histogram renders as Prometheus's own would: ``le`` buckets
inclusive of their bound, cumulative, +Inf last, with sum and count."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from tests.metrics import scrape, value

from taskq.app.observability.hot_cells import CellsCollector, CounterCells, HistogramCells
from taskq.app.observability.metric_names import Metric

METRIC = Metric("probe_seconds", "histogram", ("actor",), "A probe.", "s", (0.1, 1.0, 10.0))


def test_cells_render_the_same_text_as_prometheus_client() -> None:
    """Values on, between and past the bounds land in the buckets prometheus_client's own
    Histogram puts them in, and the rendered samples are equal."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    cells = HistogramCells(METRIC)
    counter = CounterCells(Metric("probe_total", "counter", ("actor",), "A probe."))
    ours.register(CellsCollector((cells, counter)))
    reference = Histogram(
        METRIC.prometheus, METRIC.help, METRIC.labels, registry=theirs, buckets=METRIC.buckets
    )
    for seconds in (0.05, 0.1, 0.2, 1.0, 9.9, 10.0, 11.0, 500.0):
        cells.cell("a").observe(seconds)
        reference.labels("a").observe(seconds)
    counter.cell("a").value += 3
    got = scrape(ours)
    want = scrape(theirs)
    for key, sample in want.items():
        if key[0].endswith("_created"):
            continue
        assert got[key] == sample, key
    assert value(got, "taskq_probe_seconds_bucket", actor="a", le="0.1") == 2
    assert value(got, "taskq_probe_seconds_bucket", actor="a", le="+Inf") == 8
    assert value(got, "taskq_probe_total", actor="a") == 3
    assert b"# TYPE taskq_probe_seconds histogram" in generate_latest(ours)
