"""JobFinisher on Postgres: fenced terminal writes, reschedules, cancel escalation."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from taskq.adapters.postgres.store.base import StoreCore
from taskq.adapters.postgres.store.rows import check_aware, dump_optional_json
from taskq.domain.errors import IllegalTransition, LeaseLost
from taskq.domain.job import Lease
from taskq.domain.status import TERMINAL
from taskq.ports.store_params import Finish, Reschedule

OUTCOME_RETRIED = "retried"
OUTCOME_SNOOZED = "snoozed"


def _check_terminal(outcome: Finish) -> None:
    if outcome.status not in TERMINAL:
        raise IllegalTransition(
            f"finish writes a terminal status, not {outcome.status.value} (use reschedule)"
        )


def check_aware_field(name: str, value: datetime) -> datetime:
    """A timestamp argument that must be aware (naive ones fail like a naive comparison)."""
    if value.tzinfo is None:
        raise TypeError(f"{name} must be timezone-aware, got {value!r}")
    return value


class FinishOps(StoreCore):
    async def finish(self, outcome: Finish) -> None:
        self._begin(outcome.now)
        _check_terminal(outcome)
        lost = await self._finish([outcome], [dump_optional_json(outcome.result)])
        if lost:
            raise LeaseLost(outcome.lease.job_id, outcome.lease.fencing_token)

    async def finish_many(self, outcomes: Sequence[Finish]) -> list[Lease]:
        self._begin()
        # Validate the whole batch before the first write: it is one statement.
        for outcome in outcomes:
            _check_terminal(outcome)
            check_aware(outcome.now)
        results = [dump_optional_json(outcome.result) for outcome in outcomes]
        if not outcomes:
            return []
        # A lease repeated in the batch is no longer held by its second write.
        first: dict[Lease, int] = {}
        for index, outcome in enumerate(outcomes):
            first.setdefault(outcome.lease, index)
        unique = sorted(first.values())
        lost = set(await self._finish([outcomes[i] for i in unique], [results[i] for i in unique]))
        return [
            outcome.lease
            for index, outcome in enumerate(outcomes)
            if first[outcome.lease] != index or outcome.lease in lost
        ]

    async def _finish(
        self, outcomes: Sequence[Finish], results: Sequence[str | None]
    ) -> list[Lease]:
        """Write ``outcomes`` in one statement; returns the leases that were not held."""
        rows = await self._driver.fetch(
            "finish_jobs",
            job_id=[o.lease.job_id for o in outcomes],
            fencing_token=[o.lease.fencing_token for o in outcomes],
            status=[o.status.value for o in outcomes],
            result=list(results),
            error=[o.error for o in outcomes],
            error_class=[o.error_class for o in outcomes],
            result_ttl=[o.result_ttl for o in outcomes],
            now=[o.now for o in outcomes],
            started_ago=[o.started_ago for o in outcomes],
        )
        written = {Lease(row["id"], row["fencing_token"]) for row in rows}
        return [o.lease for o in outcomes if o.lease not in written]

    async def reschedule(self, request: Reschedule) -> None:
        now = self._begin(request.now)
        check_aware_field("run_at", request.run_at)
        row = await self._driver.fetchrow(
            "reschedule_job",
            job_id=request.lease.job_id,
            fencing_token=request.lease.fencing_token,
            now=now,
            run_at=request.run_at,
            delay=None,
            refund_attempt=request.refund_attempt,
            snooze=request.snooze,
            error=request.error,
            error_class=request.error_class,
            outcome=OUTCOME_SNOOZED if request.snooze else OUTCOME_RETRIED,
            started_ago=request.started_ago,
        )
        if row is None:
            raise LeaseLost(request.lease.job_id, request.lease.fencing_token)

    async def escalate_cancel(self, lease: Lease, *, now: datetime | None = None) -> None:
        at = self._begin(now)
        job_id = await self._driver.fetchval(
            "escalate_cancel", job_id=lease.job_id, fencing_token=lease.fencing_token, now=at
        )
        if job_id is None:
            raise LeaseLost(lease.job_id, lease.fencing_token)


__all__ = ["FinishOps", "check_aware_field"]
