"""JobEnqueuer for the memory store: single and bulk enqueue with de-duplication."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from taskq.adapters.memory.rows import JobRow, to_json_object
from taskq.adapters.memory.store_base import StoreCore
from taskq.domain.errors import MaxPendingExceeded
from taskq.domain.job import EnqueueResult, NewJob
from taskq.domain.status import JobStatus
from taskq.domain.storable import check_new_jobs


class EnqueueOps(StoreCore):
    async def enqueue(self, job: NewJob, *, now: datetime | None = None) -> EnqueueResult:
        return (await self.enqueue_many([job], now=now))[0]

    async def enqueue_many(
        self, jobs: Sequence[NewJob], *, now: datetime | None = None
    ) -> list[EnqueueResult]:
        at = await self._begin(now)
        # Check every value and serialise every JSON value first, so a job
        # Postgres could not store refuses the batch before anything is written.
        check_new_jobs(jobs)
        prepared = [
            (job, to_json_object(job.payload), to_json_object(job.metadata)) for job in jobs
        ]
        results: list[EnqueueResult] = []
        inserted: list[JobRow] = []
        try:
            for job, payload, metadata in prepared:
                existing = self._existing(job)
                if existing is not None:
                    results.append(EnqueueResult(existing, was_existing=True))
                    continue
                row = self._insert(job, payload, metadata, at)
                inserted.append(row)
                results.append(EnqueueResult(row.id))
        except BaseException:
            # All or nothing, like a rolled-back transaction (ids are not reused,
            # as with a sequence).
            for row in reversed(inserted):
                self._db.uninsert_job(row.id)
            raise
        if inserted:
            queues = {row.queue for row in inserted}
            # One wake-up per statement, never one per row.
            self._db.hub.publish(queues.pop() if len(queues) == 1 else "")
        return results

    def _existing(self, job: NewJob) -> int | None:
        """The id of a stored job this one de-duplicates to, if any."""
        if job.idempotency_key is not None:
            row = self._db.stored_by_idempotency(job.actor, job.idempotency_key)
            if row is not None:
                return row.id
        if job.identity_key is not None:
            row = self._db.active_by_identity(job.actor, job.identity_key)
            if row is not None:
                return row.id
        return None

    def _insert(
        self,
        job: NewJob,
        payload: dict[str, object],
        metadata: dict[str, object],
        now: datetime,
    ) -> JobRow:
        config = self._db.actor_configs.get(job.actor)
        # A stored value overrides the literal; NULL reverts to the literal.
        max_pending = job.max_pending
        if config is not None and config.max_pending is not None:
            max_pending = config.max_pending
        if max_pending is not None and self._db.waiting_count(job.actor) >= max_pending:
            raise MaxPendingExceeded(job.actor, max_pending)
        scheduled = job.scheduled_at is not None and job.scheduled_at > now
        row = JobRow(
            id=self._db.next_job_id(),
            queue=job.queue,
            actor=job.actor,
            payload=payload,
            status=JobStatus.SCHEDULED if scheduled else JobStatus.PENDING,
            priority=job.priority,
            max_attempts=job.max_attempts,
            created_at=now,
            scheduled_at=job.scheduled_at if scheduled and job.scheduled_at else now,
            schedule_to_close=job.schedule_to_close,
            identity_key=job.identity_key,
            fairness_key=job.fairness_key,
            idempotency_key=job.idempotency_key,
            metadata=metadata,
            tags=tuple(job.tags),
            trace_id=job.trace_id,
            span_id=job.span_id,
            attempt_timeout=job.attempt_timeout,
        )
        self._db.insert_job(row)
        return row
