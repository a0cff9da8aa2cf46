"""The worker guide's three gauges, read from the worker's state at scrape time.

A custom collector: nothing is updated per job; each scrape reads one
:class:`WorkerSnapshot`. Names and HELP texts are the worker guide's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from taskq.app.observability.health_view import WorkerSnapshot


class WorkerGauges(Collector):
    """``taskq_active_jobs``, ``taskq_is_leader`` and ``taskq_shutdown_phase``."""

    def __init__(self, snapshot: Callable[[], WorkerSnapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        now = self._snapshot()
        yield GaugeMetricFamily(
            "taskq_active_jobs", "Currently in-flight jobs on this worker.", value=now.active_jobs
        )
        yield GaugeMetricFamily(
            "taskq_is_leader",
            "1 if this worker holds the maintenance leader lock.",
            value=1 if now.is_leader else 0,
        )
        yield GaugeMetricFamily(
            "taskq_shutdown_phase",
            "Current shutdown phase enum value (0=NONE).",
            value=now.shutdown_phase,
        )

    def describe(self) -> Iterator[Metric]:
        # Names only (no state read), so registering never touches the worker.
        for name in ("taskq_active_jobs", "taskq_is_leader", "taskq_shutdown_phase"):
            yield GaugeMetricFamily(name, "")


def register_worker_gauges(
    registry: CollectorRegistry, snapshot: Callable[[], WorkerSnapshot]
) -> WorkerGauges:
    """Register the three gauges on ``registry``; returns the collector (to unregister)."""
    gauges = WorkerGauges(snapshot)
    registry.register(gauges)
    return gauges
