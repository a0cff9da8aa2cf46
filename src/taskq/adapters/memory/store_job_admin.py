"""JobAdmin for the memory store: the operator's job list, retry and worker overview."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from taskq.adapters.memory.store_base import StoreCore
from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import JobNotFound, JobNotRetryable
from taskq.domain.job import Job, job_id_can_exist
from taskq.domain.status import JobStatus, retry_refusal
from taskq.ports.store_params import JobQuery, WorkerStatus


class JobAdminOps(StoreCore):
    async def list_jobs(self, query: JobQuery) -> list[Job]:
        await self._begin()
        found: list[Job] = []
        for job_id in sorted(self._db.jobs, reverse=True):
            row = self._db.jobs[job_id]
            if (
                (query.status is None or row.status is query.status)
                and (query.actor is None or row.actor == query.actor)
                and (query.queue is None or row.queue == query.queue)
            ):
                found.append(row.to_job())
                if len(found) == query.limit:
                    break
        return found

    async def retry_job(self, job_id: int, *, now: datetime | None = None) -> Job:
        at = await self._begin(now)
        row = self._db.jobs.get(job_id) if job_id_can_exist(job_id) else None
        if row is None:
            raise JobNotFound(job_id)
        refusal = retry_refusal(row.status)
        if refusal is not None:
            raise JobNotRetryable(job_id, refusal)
        if row.identity_key is not None:
            holder = self._db.active_by_identity(row.actor, row.identity_key)
            if holder is not None:
                raise JobNotRetryable(
                    job_id, f"job {holder.id} is active with its identity key {row.identity_key!r}"
                )
        row.scheduled_at = at  # before the move: it is the pending row's dispatch key
        row.started_at = row.finished_at = None
        row.result = row.result_expires_at = None
        row.cancel_phase, row.cancel_requested_at = CancelPhase.NONE, None
        row.clear_lock()
        self._db.requeue_finished(row)
        self._db.hub.publish(row.queue)  # due now: wake a listening worker, as an enqueue does
        return row.to_job()

    async def worker_status(self) -> list[WorkerStatus]:
        await self._begin()
        held = Counter(row.locked_by for row in self._db.rows_with_status(JobStatus.RUNNING))
        leader = self._db.leader.worker_id
        rows = sorted(self._db.workers.values(), key=lambda w: (w.started_at, w.worker_id))
        return [
            WorkerStatus(
                worker=w.to_record(), is_leader=w.worker_id == leader, jobs_held=held[w.worker_id]
            )
            for w in rows
        ]
