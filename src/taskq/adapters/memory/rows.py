"""The memory adapter's mutable rows and their conversion to domain types.

Rows live only inside a :class:`~taskq.adapters.memory.backend.MemoryBackend`
and are never handed out: reads return frozen domain objects whose JSON
values are fresh copies, as a database would return.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.job import JSON, AttemptRecord, ClaimedJob, Job, Lease, build_claimed_job
from taskq.domain.status import JobStatus
from taskq.domain.storable import check_json_text
from taskq.ports.store_params import WorkerRecord


def to_json(value: JSON) -> JSON:
    """``value`` as it would come back from a JSON column: a fresh, normalised copy.

    Tuples become lists, and anything JSON cannot hold (NaN, sets, datetimes)
    or ``jsonb`` refuses (a NUL in any string) raises ``TypeError``/``ValueError``
    here, as it would on a real database, instead of silently working in tests only.
    """
    text = json.dumps(value, allow_nan=False)
    check_json_text(text, "a JSON value")
    return json.loads(text)


def to_json_object(value: Mapping[str, JSON]) -> dict[str, JSON]:
    """A JSON object column value (payload, metadata)."""
    out = to_json(dict(value))
    assert isinstance(out, dict)
    return out


@dataclass(slots=True, kw_only=True)
class JobRow:
    """One row of the jobs table. ``status`` is changed only by the backend."""

    id: int
    queue: str
    actor: str
    payload: dict[str, JSON]
    status: JobStatus
    priority: int
    max_attempts: int | None
    created_at: datetime
    scheduled_at: datetime
    schedule_to_close: datetime | None
    identity_key: str | None
    fairness_key: str | None
    idempotency_key: str | None
    metadata: dict[str, JSON]
    tags: tuple[str, ...]
    trace_id: str | None
    span_id: str | None
    attempt: int = 0
    fencing_token: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    locked_by: str | None = None
    lock_expires_at: datetime | None = None
    cancel_phase: CancelPhase = CancelPhase.NONE
    cancel_requested_at: datetime | None = None
    result: JSON = None
    result_expires_at: datetime | None = None
    last_error: str | None = None
    attempt_timeout: timedelta | None = None

    @property
    def lease(self) -> Lease:
        return Lease(self.id, self.fencing_token)

    def clear_lock(self) -> None:
        """Drop the lease fields (the fencing token stays: it only ever grows)."""
        self.locked_by = None
        self.lock_expires_at = None

    def to_job(self) -> Job:
        return Job(
            id=self.id,
            queue=self.queue,
            actor=self.actor,
            payload=copy.deepcopy(self.payload),
            status=self.status,
            priority=self.priority,
            attempt=self.attempt,
            max_attempts=self.max_attempts,
            fencing_token=self.fencing_token,
            created_at=self.created_at,
            scheduled_at=self.scheduled_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            locked_by=self.locked_by,
            lock_expires_at=self.lock_expires_at,
            cancel_phase=self.cancel_phase,
            cancel_requested_at=self.cancel_requested_at,
            schedule_to_close=self.schedule_to_close,
            identity_key=self.identity_key,
            fairness_key=self.fairness_key,
            idempotency_key=self.idempotency_key,
            metadata=copy.deepcopy(self.metadata),
            tags=self.tags,
            result=copy.deepcopy(self.result),
            result_expires_at=self.result_expires_at,
            last_error=self.last_error,
            trace_id=self.trace_id,
            span_id=self.span_id,
            attempt_timeout=self.attempt_timeout,
        )

    def to_claimed(self) -> ClaimedJob:
        assert self.lock_expires_at is not None, "only a running row can be handed out"
        return build_claimed_job(
            id=self.id,
            queue=self.queue,
            actor=self.actor,
            payload=copy.deepcopy(self.payload),
            priority=self.priority,
            attempt=self.attempt,
            max_attempts=self.max_attempts,
            fencing_token=self.fencing_token,
            scheduled_at=self.scheduled_at,
            lock_expires_at=self.lock_expires_at,
            schedule_to_close=self.schedule_to_close,
            fairness_key=self.fairness_key,
            metadata=copy.deepcopy(self.metadata),
            trace_id=self.trace_id,
            span_id=self.span_id,
            started=self.started_at is not None,
            attempt_timeout=self.attempt_timeout,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchivedJob:
    """A pruned job, kept until ``expire_at`` (the jobs_archive table)."""

    job: Job
    attempts: tuple[AttemptRecord, ...]
    archived_at: datetime
    expire_at: datetime


@dataclass(slots=True, kw_only=True)
class WorkerRow:
    """One row of the workers table."""

    worker_id: str
    hostname: str
    pid: int
    queues: tuple[str, ...]
    actors: tuple[str, ...]
    started_at: datetime
    last_seen_at: datetime
    worker_label: str | None = None
    workgroup_instance: str | None = None

    def to_record(self) -> WorkerRecord:
        return WorkerRecord(
            worker_id=self.worker_id,
            hostname=self.hostname,
            pid=self.pid,
            queues=self.queues,
            started_at=self.started_at,
            last_seen_at=self.last_seen_at,
            worker_label=self.worker_label,
            workgroup_instance=self.workgroup_instance,
        )


@dataclass(slots=True, kw_only=True)
class ReservationRow:
    """One held concurrency slot (the reservation_slots table)."""

    key: str
    slot: int
    holder: str
    token: str
    expires_at: datetime


@dataclass(slots=True)
class LeaderRow:
    """The maintenance_leader row: who holds the lock, when the leader last pinged, and
    the worker that pinged (what operators see; the lock itself is ``holder``)."""

    holder: object | None = None
    last_seen_at: datetime | None = None
    worker_id: str | None = None
