"""WorkerRegistry on Postgres: registration, the heartbeat transaction, isolate-self."""

from __future__ import annotations

from datetime import datetime

from taskq.adapters.postgres.call_budget import CallBudget
from taskq.adapters.postgres.store.base import StoreCore
from taskq.adapters.postgres.store.finish import check_aware_field
from taskq.adapters.postgres.store.rows import check_lease, worker_from_row
from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.job import Lease
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
    async def applied_migration_versions(self) -> tuple[int, ...]:
        """The versions in ``schema_migrations`` (``SchemaNotMigrated`` without the table)."""
        self._begin()
        rows = await self._driver.fetch("applied_migration_versions")
        return tuple(int(row["version"]) for row in rows)

    async def register_worker(self, worker: WorkerInfo, *, now: datetime | None = None) -> None:
        at = self._begin(now)
        await self._driver.execute(
            "register_worker",
            now=at,
            worker_id=worker.worker_id,
            hostname=worker.hostname,
            pid=worker.pid,
            queues=list(worker.queues),
            actors=list(worker.actors),
            worker_label=worker.worker_label,
            workgroup_instance=worker.workgroup_instance,
        )

    async def heartbeat(self, beat: Heartbeat) -> HeartbeatReport:
        now = self._begin(beat.now)
        check_lease(beat.lease)
        bound = None if beat.timeout is None else beat.timeout.total_seconds()
        if bound is not None and not bound > 0:
            raise ValueError(f"Heartbeat.timeout must be > 0, got {beat.timeout}")
        # Its bound's StoreTimeout says what the call waited for: a free connection of
        # the pool, or the server's answer (a blocked or slow statement, a dead network).
        async with CallBudget(bound):
            rows = await self._driver.fetch(
                "heartbeat",
                now=now,
                worker_id=beat.worker_id,
                is_leader=beat.is_leader,
                lease=beat.lease,
                lapse_job_id=[lease.job_id for lease in beat.let_lapse],
                lapse_fencing_token=[lease.fencing_token for lease in beat.let_lapse],
            )
        return HeartbeatReport(
            running=tuple(
                RunningJobView(
                    lease=Lease(row["id"], row["fencing_token"]),
                    cancel_phase=CancelPhase(row["cancel_phase"]),
                    cancel_requested_at=row["cancel_requested_at"],
                    started=row["started"],
                )
                for row in rows
                if row["id"] is not None
            ),
            registered=bool(rows[0]["seen"]),
        )

    async def deregister_worker(self, worker_id: str) -> None:
        self._begin()
        await self._driver.execute("deregister_worker", worker_id=worker_id)

    async def isolate_worker(self, request: Isolation) -> list[int]:
        now = self._begin(request.now)
        check_aware_field("retry_at", request.retry_at)
        error = isolation_error(request)
        rows = await self._driver.fetch(
            "isolate_worker",
            now=now,
            worker_id=request.worker_id,
            retryable_actors=list(request.retryable_actors),
            retry_at=request.retry_at,
            error=error,
            error_class=request.error_class,
            last_error=f"{request.error_class}: {error}",
        )
        return [row["id"] for row in rows]

    async def list_workers(self) -> list[WorkerRecord]:
        self._begin()
        rows = await self._driver.fetch("list_workers")
        workers = [worker_from_row(row) for row in rows]
        return sorted(workers, key=lambda w: (w.started_at, w.worker_id))


__all__ = ["WorkerOps"]
