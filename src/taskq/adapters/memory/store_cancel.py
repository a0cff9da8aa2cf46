"""JobCanceller for the memory store."""

from __future__ import annotations

from datetime import datetime

from taskq.adapters.memory.store_base import StoreCore
from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import JobNotFound
from taskq.domain.job import job_id_can_exist
from taskq.domain.status import WAITING, JobStatus


class CancelOps(StoreCore):
    async def request_cancel(self, job_id: int, *, now: datetime | None = None) -> JobStatus:
        at = await self._begin(now)
        job_id_can_exist(job_id)  # TypeError for what is no id
        row = self._db.jobs.get(job_id)
        if row is None:
            raise JobNotFound(job_id)
        if row.status in WAITING:
            self._finish_row(row, JobStatus.CANCELLED, now=at)
            row.cancel_requested_at = at
        elif row.status is JobStatus.RUNNING and row.cancel_phase is CancelPhase.NONE:
            # The owner's next heartbeat sees the phase and cancels cooperatively.
            row.cancel_phase = CancelPhase.COOPERATIVE
            row.cancel_requested_at = at
        return row.status
