"""JobCanceller on Postgres."""

from __future__ import annotations

from datetime import datetime

from taskq.adapters.postgres.store.base import StoreCore
from taskq.domain.errors import JobNotFound
from taskq.domain.job import job_id_can_exist
from taskq.domain.status import JobStatus


class CancelOps(StoreCore):
    async def request_cancel(self, job_id: int, *, now: datetime | None = None) -> JobStatus:
        at = self._begin(now)
        if not job_id_can_exist(job_id):
            raise JobNotFound(job_id)
        row = await self._driver.fetchrow("request_cancel", job_id=job_id, now=at)
        assert row is not None
        status = row["changed_status"] or row["current_status"]
        if status is None:
            raise JobNotFound(job_id)
        return JobStatus(status)


__all__ = ["CancelOps"]
