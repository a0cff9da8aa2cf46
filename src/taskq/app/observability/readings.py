"""What the gauges read at scrape (or OTel collection) time, never on the job path.

The worker hands over a :class:`WorkerView` of its state; the leader's
queue-depth sample is cached here as it arrives (every 15 s) and cleared
when leadership ends, so only the current leader reports queue depths and a
former leader never reports a stale sample. A queue the leader has seen keeps
a series for every active status, 0 when a sample has no jobs in it: a status
that empties must read 0, not vanish from under an alert.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Final, Protocol

from taskq.app.observability import metric_names as m
from taskq.domain.status import JobStatus
from taskq.ports.store_params import QueueDepth


class WorkerView(Protocol):
    """The worker's state as the gauges read it (cheap, called on the event loop's thread
    by a scrape or by an OTel reader's collection)."""

    def local_queue_jobs(self) -> int:
        """Jobs claimed and waiting in the local queue."""
        ...

    def active_jobs(self) -> int:
        """Jobs the consumers hold now."""
        ...

    def is_leader(self) -> bool: ...

    def tick_ages(self) -> Mapping[str, float]:
        """Seconds since each interval-driven loop last ticked, by loop name."""
        ...

    def now(self) -> datetime:
        """The worker clock's wall time (for the age of the oldest pending job)."""
        ...


class Readings:
    """The worker view (None until the worker runs) and the leader's last depth sample."""

    __slots__ = ("_depths", "_seen", "view")

    def __init__(self) -> None:
        self.view: WorkerView | None = None
        self._depths: tuple[QueueDepth, ...] = ()
        #: The queues seen in this leadership's samples, in the order first seen.
        self._seen: dict[str, None] = {}

    def __repr__(self) -> str:
        return f"<Readings depths={len(self._depths)} view={self.view is not None}>"

    def depths_sampled(self, depths: Sequence[QueueDepth]) -> None:
        depths = tuple(depths)
        seen = dict(self._seen)
        seen.update((d.queue, None) for d in depths)
        # Swapped whole: a scrape from another thread reads one sample or the next.
        self._seen, self._depths = seen, depths

    def depths_cleared(self) -> None:
        self._seen, self._depths = {}, ()

    def queue_jobs(self) -> list[tuple[str, str, int]]:
        """``(queue, status, count)`` of the last sample, with 0 for each active status of
        a queue seen while leading that the sample has no jobs for; empty unless leading."""
        seen, depths = self._seen, self._depths
        counts = {(d.queue, d.status.value): d.count for d in depths}
        rows = [
            (queue, status, counts.pop((queue, status), 0))
            for queue in seen
            for status in m.ACTIVE_STATUSES
        ]
        # Anything else the sample holds (a status outside the active ones) as it came.
        rows += [(queue, status, count) for (queue, status), count in counts.items()]
        return rows

    def oldest_pending_ages(self) -> list[tuple[str, float]]:
        """``(queue, seconds)``: how long each queue's longest-waiting pending job has been
        due, as of now (0 for one due in the future: a clock apart from the database's)."""
        view = self.view
        if view is None or not self._depths:
            return []
        now = view.now()
        return [
            (d.queue, max((now - d.oldest_due_at).total_seconds(), 0.0))
            for d in self._depths
            if d.status is JobStatus.PENDING and d.oldest_due_at is not None
        ]

    def gauge(self, metric: m.Metric) -> list[Sample]:
        """``metric``'s samples now: ``(label values, value)`` each, labels in the
        metric's order; what both backends report for a gauge of :data:`~.METRICS`."""
        return _GAUGES[metric.name](self)


#: A gauge's sample: its label values (in the metric's order) and its value.
Sample = tuple[tuple[str, ...], float]


def _viewed(read: Callable[[WorkerView], list[Sample]]) -> Callable[[Readings], list[Sample]]:
    """A gauge of the worker's own state: no sample until the worker runs."""

    def gauge(readings: Readings) -> list[Sample]:
        view = readings.view
        return [] if view is None else read(view)

    return gauge


#: How each gauge of the table is read; a test pins one reader per gauge.
_GAUGES: Final[dict[str, Callable[[Readings], list[Sample]]]] = {
    m.LOCAL_QUEUE.name: _viewed(lambda view: [((), view.local_queue_jobs())]),
    m.ACTIVE_JOBS.name: _viewed(lambda view: [((), view.active_jobs())]),
    m.IS_LEADER.name: _viewed(lambda view: [((), int(view.is_leader()))]),
    m.LOOP_TICK_AGE.name: _viewed(
        lambda view: [((loop,), age) for loop, age in sorted(view.tick_ages().items())]
    ),
    m.QUEUE_JOBS.name: lambda readings: [
        ((queue, status), count) for queue, status, count in readings.queue_jobs()
    ],
    m.QUEUE_OLDEST_PENDING_AGE.name: lambda readings: [
        ((queue,), age) for queue, age in readings.oldest_pending_ages()
    ],
}


__all__ = ["Readings", "Sample", "WorkerView"]
