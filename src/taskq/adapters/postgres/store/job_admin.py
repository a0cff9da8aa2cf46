"""JobAdmin on Postgres: the operator's job list, retry and worker overview."""

from __future__ import annotations

from datetime import datetime

from taskq.adapters.postgres.store.base import StoreCore
from taskq.adapters.postgres.store.rows import job_from_row, worker_from_row
from taskq.domain.errors import JobNotFound, JobNotRetryable
from taskq.domain.job import Job, job_id_can_exist
from taskq.domain.status import JobStatus, retry_refusal
from taskq.ports.store_params import JobQuery, WorkerStatus


class JobAdminOps(StoreCore):
    async def list_jobs(self, query: JobQuery) -> list[Job]:
        self._begin()
        rows = await self._driver.fetch(
            "list_jobs",
            status=None if query.status is None else query.status.value,
            actor=query.actor,
            queue=query.queue,
            limit=query.limit,
        )
        return [job_from_row(row) for row in rows]

    async def retry_job(self, job_id: int, *, now: datetime | None = None) -> Job:
        at = self._begin(now)
        if not job_id_can_exist(job_id):
            raise JobNotFound(job_id)
        row = await self._driver.fetchrow("retry_job", job_id=job_id, now=at)
        assert row is not None
        if row["found_status"] is None:
            raise JobNotFound(job_id)
        if row["retried_id"] is None:
            refusal = retry_refusal(JobStatus(row["found_status"]))
            if refusal is None:  # retryable status: another job holds its identity key
                refusal = (
                    f"job {row['holder_id']} is active with its identity key "
                    f"{row['identity_key']!r}"
                )
            raise JobNotRetryable(job_id, refusal)
        job = await self._driver.fetchrow("get_job", job_id=job_id)
        assert job is not None  # a retried job is pending: nothing prunes it
        # Due now: wake a listening worker for its queue, as an enqueue does.
        await self._driver.execute(
            "wake_queue", channel=self._schema.wake_channel, wake_queue=job["queue"]
        )
        return job_from_row(job)

    async def worker_status(self) -> list[WorkerStatus]:
        self._begin()
        rows = await self._driver.fetch("worker_status")
        status = [
            WorkerStatus(
                worker=worker_from_row(row), is_leader=row["is_leader"], jobs_held=row["jobs_held"]
            )
            for row in rows
        ]
        return sorted(status, key=lambda s: (s.worker.started_at, s.worker.worker_id))


__all__ = ["JobAdminOps"]
