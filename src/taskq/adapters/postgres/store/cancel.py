"""JobCanceller on Postgres."""

from __future__ import annotations

from datetime import datetime

from taskq.adapters.postgres.driver import LockTimeout
from taskq.adapters.postgres.store.base import StoreCore, call_lock_wait
from taskq.domain.errors import JobNotFound, RowLockTimeout
from taskq.domain.job import job_id_can_exist
from taskq.domain.status import JobStatus


class CancelOps(StoreCore):
    async def request_cancel(self, job_id: int, *, now: datetime | None = None) -> JobStatus:
        """Cancel a waiting job, ask a running one to stop; ``JobNotFound`` without one.

        The statement updates the job's row, so it waits while another session holds
        that row locked: under the driver's call bound for half of it (a
        transaction-local ``lock_timeout``), then ``RowLockTimeout`` (nothing changed).
        """
        at = self._begin(now)
        if not job_id_can_exist(job_id):
            raise JobNotFound(job_id)
        lock_timeout, waited = call_lock_wait(self._driver)
        try:
            row = await self._driver.fetchrow(
                "request_cancel", job_id=job_id, now=at, lock_timeout=lock_timeout
            )
        except LockTimeout as exc:
            raise RowLockTimeout(job_id, waited) from exc
        assert row is not None
        status = row["changed_status"] or row["current_status"]
        if status is None:
            raise JobNotFound(job_id)
        return JobStatus(status)


__all__ = ["CancelOps"]
