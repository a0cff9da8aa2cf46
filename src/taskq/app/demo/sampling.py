"""The sampler behind the live display: what the demo's jobs are doing, 4 times a second."""

from __future__ import annotations

import asyncio
import time

from taskq.app.client import JobsClient
from taskq.app.demo.actors import DEMO_QUEUE, DemoLedger
from taskq.app.demo.progress import SAMPLE_INTERVAL, ProgressView, RateMeter, Snapshot
from taskq.domain.errors import TaskQError
from taskq.domain.status import JobStatus


class Sampler:
    """Reads the counts for :class:`Snapshot` s; ``run`` feeds a view until cancelled."""

    def __init__(self, client: JobsClient, ledger: DemoLedger, *, total: int) -> None:
        self.client = client
        self.ledger = ledger
        self.total = total
        self.meter = RateMeter()
        self.started = time.monotonic()
        self.last: Snapshot | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    async def run(self, view: ProgressView) -> None:
        """Show a fresh snapshot every SAMPLE_INTERVAL, until cancelled."""
        while True:
            snap = await self.snapshot()
            if snap is not None:
                view.show(snap)
            await asyncio.sleep(SAMPLE_INTERVAL)

    async def snapshot(self) -> Snapshot | None:
        """Waiting jobs from the database, finished ones from the actors' ledger.

        Running is the rest, so the cells always add up to the total. ``None``
        when the database read fails (the display keeps its last state).
        """
        try:
            depths = await self.client.store.queue_depths()
        except TaskQError:
            return None
        waiting = {JobStatus.PENDING: 0, JobStatus.SCHEDULED: 0}
        for depth in depths:
            if depth.queue == DEMO_QUEUE and depth.status in waiting:
                waiting[depth.status] += depth.count
        counts = self.ledger.counts()
        finished = counts.succeeded + counts.failed
        pending, scheduled = waiting[JobStatus.PENDING], waiting[JobStatus.SCHEDULED]
        elapsed = self.elapsed()
        self.last = Snapshot(
            elapsed=elapsed,
            total=self.total,
            pending=pending,
            scheduled=scheduled,
            running=max(0, self.total - pending - scheduled - finished),
            succeeded=counts.succeeded,
            failed=counts.failed,
            retried=counts.retried,
            rate=self.meter.add(elapsed, finished),
        )
        return self.last


__all__ = ["Sampler"]
