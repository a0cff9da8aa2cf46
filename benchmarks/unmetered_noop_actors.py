"""The benchmarks' no-op actor, in a worker whose metrics recording is switched off.

``bench_metrics.py --drain`` loads it as ``--actors unmetered_noop_actors:registry`` for its
"off" arm: the recorder's per-job and per-claim methods are replaced with no-ops, so the arm
runs the same worker with nothing recorded (TaskQ itself has no such switch: what it would
save is what the benchmark measures). Everything else (the registry, the scrape-time gauges,
which cost nothing until scraped) is as in the "on" arm.
"""

from __future__ import annotations

from typing import Any

import noop_actors

from taskq.app.observability.metrics import WorkerMetrics


def _nothing(self: WorkerMetrics, *args: Any) -> None:
    return None


WorkerMetrics.attempt_ended = _nothing  # type: ignore[method-assign]
WorkerMetrics.claimed = _nothing  # type: ignore[method-assign]

registry = noop_actors.registry
