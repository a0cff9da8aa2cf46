"""JobReader on Postgres. Sorting happens here, in Python's order, not the collation's."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from taskq.adapters.postgres.store.base import StoreCore
from taskq.adapters.postgres.store.rows import attempt_from_row, job_from_row
from taskq.domain.job import AttemptRecord, Job, job_id_can_exist
from taskq.domain.status import JobStatus
from taskq.ports.store_params import QueueDepth, StrandedJobs, StrandedReason


class ReadOps(StoreCore):
    async def get(self, job_id: int) -> Job | None:
        self._begin()
        if not job_id_can_exist(job_id):
            return None
        row = await self._driver.fetchrow("get_job", job_id=job_id)
        return None if row is None else job_from_row(row)

    async def attempts(self, job_id: int) -> list[AttemptRecord]:
        self._begin()
        if not job_id_can_exist(job_id):
            return []
        rows = await self._driver.fetch("job_attempts", job_id=job_id)
        return [attempt_from_row(row) for row in rows]

    async def count_active(self, queues: Sequence[str] | None = None) -> int:
        self._begin()
        if queues is None:
            active: int = await self._driver.fetchval("count_active")
        else:
            active = await self._driver.fetchval("count_active_in", queues=list(queues))
        return active

    async def queue_depths(self) -> list[QueueDepth]:
        self._begin()
        rows = await self._driver.fetch("queue_depths")
        depths = [
            QueueDepth(
                queue=row["queue"],
                status=JobStatus(row["status"]),
                count=row["count"],
                oldest_due_at=row["oldest_due_at"],
            )
            for row in rows
        ]
        return sorted(depths, key=lambda d: (d.queue, d.status.value))

    async def stranded_actors(
        self,
        queues: Sequence[str] | None = None,
        *,
        stale_after: timedelta,
        now: datetime | None = None,
    ) -> list[StrandedJobs]:
        at = self._begin(now)
        if queues is None:
            rows = await self._driver.fetch("stranded_actors", now=at, stale_after=stale_after)
        else:
            rows = await self._driver.fetch(
                "stranded_actors_in", now=at, stale_after=stale_after, queues=list(queues)
            )
        stranded = [
            StrandedJobs(
                actor=row["actor"],
                queue=row["queue"],
                waiting=row["waiting"],
                reason=StrandedReason(row["reason"]),
            )
            for row in rows
        ]
        return sorted(stranded, key=lambda s: (s.actor, s.queue))


__all__ = ["ReadOps"]
