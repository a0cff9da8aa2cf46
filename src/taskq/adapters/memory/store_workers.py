"""WorkerRegistry for the memory store: registration, heartbeat, isolate-self."""

from __future__ import annotations

from datetime import datetime, timedelta

from taskq.adapters.memory.rows import WorkerRow
from taskq.adapters.memory.store_base import OUTCOME_INTERRUPTED, StoreCore, lease_until
from taskq.domain.status import JobStatus
from taskq.ports.store_params import (
    Heartbeat,
    HeartbeatReport,
    Isolation,
    RunningJobView,
    WorkerInfo,
    WorkerRecord,
    isolation_error,
)


class WorkerOps(StoreCore):
    async def register_worker(self, worker: WorkerInfo, *, now: datetime | None = None) -> None:
        at = await self._begin(now)
        # Re-registering the same id is an upsert: a restarted worker starts over.
        self._db.workers[worker.worker_id] = WorkerRow(
            worker_id=worker.worker_id,
            hostname=worker.hostname,
            pid=worker.pid,
            queues=tuple(worker.queues),
            actors=tuple(worker.actors),
            started_at=at,
            last_seen_at=at,
            worker_label=worker.worker_label,
            workgroup_instance=worker.workgroup_instance,
        )

    async def heartbeat(self, beat: Heartbeat) -> HeartbeatReport:
        now = await self._begin(beat.now)
        if beat.timeout is not None and not beat.timeout > timedelta(0):
            raise ValueError(f"Heartbeat.timeout must be > 0, got {beat.timeout}")
        # Nothing here waits (no pool, no row locks): the timeout has nothing to bound.
        expires = lease_until(now, beat.lease)
        worker = self._db.workers.get(beat.worker_id)
        if worker is not None:
            worker.last_seen_at = now
        if beat.is_leader:
            self._db.leader.last_seen_at = now
            self._db.leader.worker_id = beat.worker_id
        lapsing = set(beat.let_lapse)
        views: list[RunningJobView] = []
        for row in self._db.rows_with_status(JobStatus.RUNNING):
            if row.locked_by != beat.worker_id:
                continue
            if row.lease not in lapsing:
                row.lock_expires_at = expires
            views.append(
                RunningJobView(
                    lease=row.lease,
                    cancel_phase=row.cancel_phase,
                    cancel_requested_at=row.cancel_requested_at,
                    started=row.started_at is not None,
                )
            )
        return HeartbeatReport(running=tuple(views), registered=worker is not None)

    async def deregister_worker(self, worker_id: str) -> None:
        await self._begin()
        self._db.workers.pop(worker_id, None)

    async def isolate_worker(self, request: Isolation) -> list[int]:
        now = await self._begin(request.now)
        retryable = set(request.retryable_actors)
        error, error_class = isolation_error(request), request.error_class
        affected: list[int] = []
        for row in list(self._db.rows_with_status(JobStatus.RUNNING)):
            if row.locked_by != request.worker_id:
                continue
            affected.append(row.id)
            if row.started_at is None:
                # Never ran: back where it was in line, attempt kept, nothing recorded.
                row.attempt = max(row.attempt - 1, 0)
                if not self._cancel_instead(row, now):
                    self._db.move(row, JobStatus.PENDING)
                    row.clear_lock()
                continue
            if row.actor in retryable:
                self._record_attempt(
                    row,
                    outcome=OUTCOME_INTERRUPTED,
                    now=now,
                    error_class=error_class,
                    error=error,
                )
                row.last_error = f"{error_class}: {error}"
                self._wait_again(row, run_at=request.retry_at, now=now, refund_attempt=True)
                continue
            self._record_attempt(
                row, outcome=JobStatus.CRASHED.value, now=now, error_class=error_class, error=error
            )
            row.last_error = f"{error_class}: {error}"
            if not self._cancel_instead(row, now):
                self._finish_row(row, JobStatus.CRASHED, now=now)
        return affected

    async def list_workers(self) -> list[WorkerRecord]:
        await self._begin()
        rows = sorted(self._db.workers.values(), key=lambda w: (w.started_at, w.worker_id))
        return [w.to_record() for w in rows]
