"""LeaseJanitor and RetentionJanitor for the memory store: the leader's sweeps."""

from __future__ import annotations

from datetime import datetime, timedelta

from taskq.adapters.memory.rows import ArchivedJob
from taskq.adapters.memory.store_base import OUTCOME_LEASE_EXPIRED, StoreCore
from taskq.domain.job import RECLAIMED_UNSTARTED
from taskq.domain.status import TERMINAL, WAITING, JobStatus
from taskq.ports.store_params import PrunePolicy, ReclaimReport

_LEASE_EXPIRED = "LeaseExpired"
_DEADLINE_EXCEEDED = "DeadlineExceeded"


class MaintenanceOps(StoreCore):
    # --- LeaseJanitor ---------------------------------------------------------------

    async def promote_scheduled(self, *, now: datetime | None = None) -> int:
        at = await self._begin(now)
        promoted = 0
        for row in self._db.rows_with_status(JobStatus.SCHEDULED):
            if row.scheduled_at <= at:
                self._db.move(row, JobStatus.PENDING)
                promoted += 1
        return promoted

    async def reclaim_expired(self, *, now: datetime | None = None) -> ReclaimReport:
        at = await self._begin(now)
        repended: list[int] = []
        crashed: list[int] = []
        cancelled: list[int] = []
        unstarted: list[int] = []
        for row in self._db.rows_with_status(JobStatus.RUNNING):
            if row.lock_expires_at is None or row.lock_expires_at >= at:
                continue
            if row.started_at is None:
                # No start on record: its attempt is kept, no attempt is recorded, and the
                # count tells its next worker to gate it (a mark before it runs).
                unstarted.append(row.id)
                row.attempt = max(row.attempt - 1, 0)
                seen = row.metadata.get(RECLAIMED_UNSTARTED, 0)
                count = seen if isinstance(seen, int) and not isinstance(seen, bool) else 0
                row.metadata = {**row.metadata, RECLAIMED_UNSTARTED: count + 1}
                if self._cancel_instead(row, at):
                    cancelled.append(row.id)
                else:
                    self._db.move(row, JobStatus.PENDING)
                    row.clear_lock()
                    repended.append(row.id)
                continue
            error = f"lease held by {row.locked_by} expired at {row.lock_expires_at.isoformat()}"
            out_of_attempts = row.max_attempts is not None and row.attempt >= row.max_attempts
            self._record_attempt(
                row,
                outcome=JobStatus.CRASHED.value if out_of_attempts else OUTCOME_LEASE_EXPIRED,
                now=at,
                error_class=_LEASE_EXPIRED,
                error=error,
            )
            row.last_error = f"{_LEASE_EXPIRED}: {error}"
            if self._cancel_instead(row, at):
                cancelled.append(row.id)
            elif out_of_attempts:
                self._finish_row(row, JobStatus.CRASHED, now=at)
                crashed.append(row.id)
            else:
                # Keeps its attempt count and its place in line; the next claim
                # issues a new fencing token, so the old owner cannot write.
                self._db.move(row, JobStatus.PENDING)
                row.clear_lock()
                repended.append(row.id)
        return ReclaimReport(
            repended=tuple(repended),
            crashed=tuple(crashed),
            cancelled=tuple(cancelled),
            unstarted=tuple(unstarted),
        )

    async def time_to_lease_expiry(self, *, now: datetime | None = None) -> timedelta | None:
        at = await self._begin(now)
        expiries = [
            row.lock_expires_at
            for row in self._db.rows_with_status(JobStatus.RUNNING)
            if row.lock_expires_at is not None
        ]
        return min(expiries) - at if expiries else None

    async def fail_past_deadline(self, *, now: datetime | None = None) -> list[int]:
        at = await self._begin(now)
        failed: list[int] = []
        for row in self._db.rows_with_status(*WAITING):
            if row.schedule_to_close is None or row.schedule_to_close > at:
                continue
            self._finish_row(row, JobStatus.FAILED, now=at)
            row.last_error = (
                f"{_DEADLINE_EXCEEDED}: schedule_to_close "
                f"{row.schedule_to_close.isoformat()} passed before the job ran"
            )
            failed.append(row.id)
        return failed

    async def cleanup_stale_workers(
        self, *, stale_after: timedelta, now: datetime | None = None
    ) -> list[str]:
        at = await self._begin(now)
        cutoff = at - stale_after
        stale = sorted(w.worker_id for w in self._db.workers.values() if w.last_seen_at < cutoff)
        for worker_id in stale:
            del self._db.workers[worker_id]
        return stale

    # --- RetentionJanitor -----------------------------------------------------------

    async def prune(self, policy: PrunePolicy) -> int:
        """Archive every eligible job (``batch_size`` only bounds a SQL batch)."""
        now = await self._begin(policy.now)
        expire_at = now + policy.archive_retention
        doomed = [
            row.id
            for row in self._db.rows_with_status(*TERMINAL)
            if row.status in policy.retention
            and row.finished_at is not None
            and row.finished_at < now - policy.retention[row.status]
        ]
        for job_id in doomed:
            row = self._db.remove_job(job_id)
            self._db.archive[job_id] = ArchivedJob(
                job=row.to_job(),
                attempts=tuple(self._db.attempts.pop(job_id, ())),
                archived_at=now,
                expire_at=expire_at,
            )
        return len(doomed)

    async def expire_archive(self, *, now: datetime | None = None) -> int:
        at = await self._begin(now)
        expired = [i for i, archived in self._db.archive.items() if archived.expire_at <= at]
        for job_id in expired:
            del self._db.archive[job_id]
        return len(expired)

    async def expire_results(self, *, now: datetime | None = None) -> int:
        """Clear results whose TTL passed; ``result_expires_at`` stays as a record."""
        at = await self._begin(now)
        cleared = 0
        for row in self._db.rows_with_status(*TERMINAL):
            expires = row.result_expires_at
            if expires is not None and expires <= at and row.result is not None:
                row.result = None
                cleared += 1
        return cleared
