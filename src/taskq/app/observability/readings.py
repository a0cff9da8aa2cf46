"""What the gauges read at scrape (or OTel collection) time, never on the job path.

The worker hands over a :class:`WorkerView` of its state; the leader's
queue-depth sample is cached here as it arrives (every 15 s) and cleared
when leadership ends, so only the current leader reports queue depths and a
former leader never reports a stale sample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

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

    __slots__ = ("_depths", "view")

    def __init__(self) -> None:
        self.view: WorkerView | None = None
        self._depths: tuple[QueueDepth, ...] = ()

    def __repr__(self) -> str:
        return f"<Readings depths={len(self._depths)} view={self.view is not None}>"

    def depths_sampled(self, depths: Sequence[QueueDepth]) -> None:
        self._depths = tuple(depths)

    def depths_cleared(self) -> None:
        self._depths = ()

    def queue_jobs(self) -> list[tuple[str, str, int]]:
        """``(queue, status, count)`` of the last sample; empty unless leading."""
        return [(d.queue, d.status.value, d.count) for d in self._depths]

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


__all__ = ["Readings", "WorkerView"]
