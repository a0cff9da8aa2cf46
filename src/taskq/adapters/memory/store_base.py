"""What every role of the memory store shares: the backend, time, the lease check.

Each public store method starts with ``await self._begin(now)`` (one yield to
the loop, as a database round trip would, then the open/reachable checks)
and afterwards runs to completion without awaiting, which makes it atomic.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import LeaseLost, StoreClosed, StoreUnavailable
from taskq.domain.job import AttemptRecord, Lease
from taskq.domain.status import JobStatus

if TYPE_CHECKING:
    from taskq.adapters.memory.backend import MemoryBackend
    from taskq.adapters.memory.rows import JobRow

# ``AttemptRecord.outcome`` values for attempts that did not end in a terminal
# status (a terminal write records the status itself, e.g. "succeeded").
OUTCOME_RETRIED: Final = "retried"
OUTCOME_SNOOZED: Final = "snoozed"
OUTCOME_RELEASED: Final = "released"
OUTCOME_LEASE_EXPIRED: Final = "lease_expired"
OUTCOME_INTERRUPTED: Final = "interrupted"


class StoreCore:
    """State and helpers shared by the store's role mixins."""

    def __init__(self, backend: MemoryBackend) -> None:
        self._db = backend
        self._closed = False
        self._reachable = True

    @property
    def backend(self) -> MemoryBackend:
        """The shared state this store works on."""
        return self._db

    def set_reachable(self, reachable: bool) -> None:
        """Simulate this store alone losing (False) or regaining its connection.

        While unreachable every call raises ``StoreUnavailable``; other stores
        on the same backend keep working (one worker partitioned away).
        """
        self._reachable = reachable

    async def _begin(self, now: datetime | None = None) -> datetime:
        """Yield once, check the store can be used, and resolve ``now``."""
        await asyncio.sleep(0)
        if self._closed:
            raise StoreClosed("memory store is closed")
        if not self._reachable:
            raise StoreUnavailable("memory store is unreachable (set_reachable(False))")
        self._db.check_reachable()
        return self._resolve_now(now)

    def _resolve_now(self, now: datetime | None) -> datetime:
        if now is None:
            return self._db.clock.now()
        if now.tzinfo is None:
            raise ValueError(f"now must be timezone-aware, got {now!r}")
        return now

    def _owned(self, lease: Lease) -> JobRow | None:
        """The running row ``lease`` still owns, or None."""
        row = self._db.jobs.get(lease.job_id)
        if (
            row is None
            or row.status is not JobStatus.RUNNING
            or row.fencing_token != lease.fencing_token
        ):
            return None
        return row

    def _require_owned(self, lease: Lease) -> JobRow:
        row = self._owned(lease)
        if row is None:
            raise LeaseLost(lease.job_id, lease.fencing_token)
        return row

    def _record_attempt(
        self,
        row: JobRow,
        *,
        outcome: str,
        now: datetime,
        error_class: str | None = None,
        error: str | None = None,
        traceback: str | None = None,
    ) -> None:
        """Append the attempt ``row`` is on now; call before clearing its lock and start."""
        self._db.record_attempt(
            AttemptRecord(
                job_id=row.id,
                attempt=row.attempt,
                worker_id=row.locked_by,
                outcome=outcome,
                error_class=error_class,
                error=error,
                finished_at=now,
                started_at=row.started_at,
                traceback=traceback,
            )
        )

    def _wait_again(
        self, row: JobRow, *, run_at: datetime, now: datetime, refund_attempt: bool
    ) -> None:
        """Put a running row back to wait until ``run_at`` and drop its lease.

        Due at once (``run_at <= now``) makes it pending with
        ``scheduled_at = now``, as a fresh enqueue would be; otherwise it is
        scheduled at ``run_at``. A job whose cancel was requested ends cancelled
        instead: nothing would act on the request once it waits again.
        """
        if refund_attempt:
            row.attempt = max(row.attempt - 1, 0)
        if self._cancel_instead(row, now):
            return
        # scheduled_at first: it is part of a pending row's key in the dispatch index.
        if run_at <= now:
            row.scheduled_at = now
            self._db.move(row, JobStatus.PENDING)
        else:
            row.scheduled_at = run_at
            self._db.move(row, JobStatus.SCHEDULED)
        row.clear_lock()

    def _cancel_instead(self, row: JobRow, now: datetime) -> bool:
        """End a running row cancelled if a cancel was requested; whether it did."""
        if row.cancel_phase < CancelPhase.COOPERATIVE:
            return False
        self._finish_row(row, JobStatus.CANCELLED, now=now)
        return True

    def _finish_row(self, row: JobRow, status: JobStatus, *, now: datetime) -> None:
        """Move a row to a terminal status and drop its lease (the fencing token stays)."""
        self._db.move(row, status)
        row.finished_at = now
        row.clear_lock()


def lease_until(now: datetime, lease: timedelta) -> datetime:
    if lease <= timedelta(0):
        raise ValueError(f"lease must be > 0, got {lease}")
    return now + lease
