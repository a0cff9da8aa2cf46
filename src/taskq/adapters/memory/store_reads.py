"""JobReader for the memory store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

from taskq.adapters.memory.store_base import StoreCore
from taskq.domain.job import AttemptRecord, Job, job_id_can_exist
from taskq.domain.status import WAITING, JobStatus
from taskq.ports.store_params import QueueDepth, StrandedJobs, StrandedReason

_ACTIVE = (JobStatus.PENDING, JobStatus.SCHEDULED, JobStatus.RUNNING)


class ReadOps(StoreCore):
    async def get(self, job_id: int) -> Job | None:
        await self._begin()
        job_id_can_exist(job_id)  # TypeError for what is no id
        row = self._db.jobs.get(job_id)
        return None if row is None else row.to_job()

    async def attempts(self, job_id: int) -> list[AttemptRecord]:
        """Attempts of a job in the jobs table, oldest first; [] when unknown or archived."""
        await self._begin()
        job_id_can_exist(job_id)
        return list(self._db.attempts.get(job_id, ())) if job_id in self._db.jobs else []

    async def count_active(self, queues: Sequence[str] | None = None) -> int:
        await self._begin()
        wanted = None if queues is None else set(queues)
        return sum(1 for row in self._db.active_rows() if wanted is None or row.queue in wanted)

    async def queue_depths(self) -> list[QueueDepth]:
        """Active (pending, scheduled, running) counts per queue and status, sorted, each
        with the earliest scheduled_at of its jobs."""
        await self._begin()
        counts: Counter[tuple[str, JobStatus]] = Counter()
        oldest: dict[tuple[str, JobStatus], datetime] = {}
        for row in self._db.active_rows():
            key = (row.queue, row.status)
            counts[key] += 1
            known = oldest.get(key)
            if known is None or row.scheduled_at < known:
                oldest[key] = row.scheduled_at
        return [
            QueueDepth(queue=queue, status=status, count=count, oldest_due_at=oldest[queue, status])
            for (queue, status), count in sorted(counts.items())
        ]

    async def stranded_actors(
        self,
        queues: Sequence[str] | None = None,
        *,
        stale_after: timedelta,
        now: datetime | None = None,
    ) -> list[StrandedJobs]:
        """Waiting jobs per (actor, queue) that no live worker can claim, and why."""
        at = await self._begin(now)
        wanted = None if queues is None else set(queues)
        cutoff = at - stale_after
        live = [w for w in self._db.workers.values() if w.last_seen_at >= cutoff]
        counts: Counter[tuple[str, str]] = Counter(
            (row.actor, row.queue)
            for row in self._db.rows_with_status(*WAITING)
            if wanted is None or row.queue in wanted
        )
        stranded: list[StrandedJobs] = []
        for (actor, queue), waiting in sorted(counts.items()):
            registering = [w for w in live if actor in w.actors]
            if any(queue in w.queues for w in registering):
                continue
            if registering:
                reason = StrandedReason.QUEUE_NOT_CONSUMED
            elif actor in self._db.actor_configs:
                reason = StrandedReason.NO_LIVE_WORKER
            else:
                reason = StrandedReason.UNREGISTERED
            stranded.append(StrandedJobs(actor=actor, queue=queue, waiting=waiting, reason=reason))
        return stranded
