"""Health checks: a child whose ``workers.last_seen_at`` stopped moving is stale.

Staleness is measured on the supervisor's monotonic clock, as "how long since the
child's ``last_seen_at`` last changed", never as ``now - last_seen_at``: the column is
written with the database's clock, and comparing it with this host's would make a
skewed clock kill healthy children (or spare dead ones).

A child is found by its row: this workgroup's instance, this host, the child's PID. A
child with no row yet counts from its start, so one that never registers (hung
connecting) is stale too after ``stale_after``.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from datetime import datetime

from taskq.ports.queue_store import WorkerRegistry


@dataclass(slots=True)
class Heartbeat:
    """What the checker last saw of one child process."""

    last_seen_at: datetime | None
    changed_at: float


class StaleTracker:
    """Pure: per child PID, when its ``last_seen_at`` was last seen to change."""

    def __init__(self) -> None:
        self._seen: dict[int, Heartbeat] = {}

    def started(self, pid: int, now: float) -> None:
        """A new child: its grace counts from ``now``."""
        self._seen[pid] = Heartbeat(None, now)

    def forget(self, pid: int) -> None:
        self._seen.pop(pid, None)

    def is_stale(
        self, pid: int, last_seen_at: datetime | None, now: float, stale_after: float
    ) -> bool:
        """Record what a check read (``None``: no row) and say whether the child is stale."""
        beat = self._seen.setdefault(pid, Heartbeat(None, now))
        if last_seen_at is not None and last_seen_at != beat.last_seen_at:
            beat.last_seen_at = last_seen_at
            beat.changed_at = now
        return now - beat.changed_at > stale_after


async def read_last_seen(registry: WorkerRegistry, instance: str) -> dict[int, datetime]:
    """``last_seen_at`` by PID of this host's workers in workgroup ``instance``.

    Through the store's ``list_workers`` role method: the supervisor writes no SQL.
    """
    host = socket.gethostname()
    return {
        record.pid: record.last_seen_at
        for record in await registry.list_workers()
        if record.workgroup_instance == instance and record.hostname == host
    }
