"""JobFinisher for the memory store: fenced terminal writes, reschedules, cancel escalation."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from taskq.adapters.memory.rows import JobRow, to_json
from taskq.adapters.memory.store_base import (
    OUTCOME_INTERRUPTED,
    OUTCOME_RETRIED,
    OUTCOME_SNOOZED,
    StoreCore,
)
from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import IllegalTransition
from taskq.domain.job import Lease
from taskq.domain.status import TERMINAL, JobStatus
from taskq.ports.store_params import Finish, Interruption, Reschedule


def _check_terminal(outcome: Finish) -> None:
    if outcome.status not in TERMINAL:
        raise IllegalTransition(
            f"finish writes a terminal status, not {outcome.status.value} (use reschedule)"
        )


class FinishOps(StoreCore):
    async def finish(self, outcome: Finish) -> None:
        now = await self._begin(outcome.now)
        _check_terminal(outcome)
        result = to_json(outcome.result)
        row = self._require_owned(outcome.lease)
        self._apply_finish(row, outcome, result, now, self._result_expiry(row, outcome, now))

    async def finish_many(self, outcomes: Sequence[Finish]) -> list[Lease]:
        await self._begin()
        return self._finish_many_now(outcomes)

    def _finish_many_now(self, outcomes: Sequence[Finish]) -> list[Lease]:
        """finish_many after ``_begin``: no await, so it is atomic with what follows it."""
        # Validate and compute the whole batch before the first write: it is one
        # statement, all or nothing.
        planned: list[tuple[Finish, datetime, datetime | None]] = []
        for outcome in outcomes:
            _check_terminal(outcome)
            now = self._resolve_now(outcome.now)
            row = self._owned(outcome.lease)
            expires = None if row is None else self._result_expiry(row, outcome, now)
            planned.append((outcome, now, expires))
        results = [to_json(outcome.result) for outcome in outcomes]
        lost: list[Lease] = []
        for (outcome, now, expires), result in zip(planned, results, strict=True):
            row = self._owned(outcome.lease)  # again: a lease repeated in the batch is lost
            if row is None:
                lost.append(outcome.lease)
            else:
                self._apply_finish(row, outcome, result, now, expires)
        return lost

    async def reschedule(self, request: Reschedule) -> None:
        now = await self._begin(request.now)
        row = self._require_owned(request.lease)
        _fill_start(row, request.started_ago, now)
        self._record_attempt(
            row,
            outcome=OUTCOME_SNOOZED if request.snooze else OUTCOME_RETRIED,
            now=now,
            error_class=request.error_class,
            error=request.error,
            traceback=request.traceback,
        )
        if request.error is not None or request.error_class is not None:
            row.last_error = request.error if request.error is not None else request.error_class
        if request.snooze:
            row.metadata = {**row.metadata, "snooze_count": _snooze_count(row) + 1}
        self._wait_again(row, run_at=request.run_at, now=now, refund_attempt=request.refund_attempt)

    async def interrupt(self, request: Interruption) -> None:
        now = await self._begin(request.now)
        row = self._require_owned(request.lease)
        _fill_start(row, request.started_ago, now)
        self._record_attempt(
            row,
            outcome=OUTCOME_INTERRUPTED,
            now=now,
            error_class=request.error_class,
            error=request.error,
        )
        row.last_error = request.error
        if request.retryable:
            self._wait_again(row, run_at=request.run_at, now=now, refund_attempt=True)
        elif not self._cancel_instead(row, now):
            self._finish_row(row, JobStatus.ABANDONED, now=now)

    async def escalate_cancel(self, lease: Lease, *, now: datetime | None = None) -> None:
        at = await self._begin(now)
        row = self._require_owned(lease)
        # Phases only move forward: a job already past FORCED stays there.
        if row.cancel_phase < CancelPhase.FORCED:
            row.cancel_phase = CancelPhase.FORCED
        if row.cancel_requested_at is None:
            row.cancel_requested_at = at

    def _result_expiry(self, row: JobRow, outcome: Finish, now: datetime) -> datetime | None:
        """When the result expires; ``ValueError`` past the latest time a store keeps
        (as Postgres refuses a timestamp out of range)."""
        config = self._db.actor_configs.get(row.actor)
        ttl = outcome.result_ttl
        if config is not None and config.result_ttl is not None:
            ttl = config.result_ttl
        if ttl is None:
            return None
        try:
            return now + ttl
        except OverflowError:
            raise ValueError(
                f"result_ttl {ttl} after {now.isoformat()} is past the latest time a store can keep"
            ) from None

    def _apply_finish(
        self, row: JobRow, outcome: Finish, result: object, now: datetime, expires: datetime | None
    ) -> None:
        _fill_start(row, outcome.started_ago, now)
        self._record_attempt(
            row,
            outcome=outcome.status.value,
            now=now,
            error_class=outcome.error_class,
            error=outcome.error,
            traceback=outcome.traceback,
        )
        self._finish_row(row, outcome.status, now=now)
        row.result = result
        row.result_expires_at = expires
        if outcome.status is JobStatus.SUCCEEDED:
            row.last_error = None  # an earlier attempt's error stays in the history only
        elif outcome.error is not None or outcome.error_class is not None:
            row.last_error = outcome.error if outcome.error is not None else outcome.error_class


def _fill_start(row: JobRow, started_ago: timedelta | None, now: datetime) -> None:
    """An attempt whose start mark never landed began ``started_ago`` before this write."""
    if row.started_at is None and started_ago is not None:
        row.started_at = now - started_ago


def _snooze_count(row: JobRow) -> int:
    value = row.metadata.get("snooze_count", 0)
    return value if isinstance(value, int) else 0
