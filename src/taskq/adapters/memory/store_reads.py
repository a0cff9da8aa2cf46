"""JobReader for the memory store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from taskq.adapters.memory.store_base import StoreCore
from taskq.domain.job import AttemptRecord, Job, job_id_can_exist
from taskq.domain.status import WAITING, JobStatus
from taskq.ports.store_params import QueueDepth

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
        """Active (pending, scheduled, running) counts per queue and status, sorted."""
        await self._begin()
        counts = Counter((row.queue, row.status) for row in self._db.active_rows())
        return [
            QueueDepth(queue=queue, status=status, count=count)
            for (queue, status), count in sorted(counts.items())
        ]

    async def stranded_actors(self) -> dict[str, int]:
        """Waiting jobs per actor that has no actor_config row (no worker registered it)."""
        await self._begin()
        counts: Counter[str] = Counter(
            row.actor
            for row in self._db.rows_with_status(*WAITING)
            if row.actor not in self._db.actor_configs
        )
        return dict(sorted(counts.items()))
