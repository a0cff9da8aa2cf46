"""JobFinisher on Postgres: fenced terminal writes, reschedules, cancel escalation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Final

from taskq.adapters.postgres.driver import Driver, Row
from taskq.adapters.postgres.store.base import StoreCore
from taskq.adapters.postgres.store.rows import check_aware, dump_optional_json
from taskq.domain.errors import IllegalTransition, LeaseLost
from taskq.domain.job import Lease
from taskq.domain.status import TERMINAL
from taskq.ports.store_params import Finish, Interruption, Reschedule

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


def _set_or_null(column: Sequence[object]) -> list[object] | None:
    """``column`` as a list, or None when every element is None (the statement pads it)."""
    for value in column:
        if value is not None:
            return list(column)
    return None


#: finish_and_claim's write parameters: one array each, one element per terminal write.
WRITE_PARAMS: Final = (
    "job_id",
    "fencing_token",
    "status",
    "result",
    "error",
    "error_class",
    "result_ttl",
    "finished_now",
    "started_ago",
    "traceback",
)
#: finish_and_claim's claim parameters when it only writes (a claim of nothing).
NO_CLAIM: Final[Mapping[str, object]] = MappingProxyType(
    {
        "now": None,
        "queue": None,
        "actors": [],
        "limit": 0,
        "worker_id": None,
        "lease": None,
        "start_now": 0,
    }
)


@dataclass(frozen=True, slots=True)
class FinishBatch:
    """A batch of terminal writes, checked, with a repeated lease written only once."""

    outcomes: Sequence[Finish]
    #: Per outcome, the index of the first outcome with its lease (itself when unique).
    first: Sequence[int]
    unique: Sequence[Finish]
    results: Sequence[str | None]

    @classmethod
    def of(cls, outcomes: Sequence[Finish]) -> FinishBatch:
        """Validate the whole batch before the first write: it is one statement."""
        for outcome in outcomes:
            _check_terminal(outcome)
            check_aware(outcome.now)
        results = [dump_optional_json(outcome.result) for outcome in outcomes]
        firsts: dict[Lease, int] = {}
        for index, outcome in enumerate(outcomes):
            firsts.setdefault(outcome.lease, index)
        unique = sorted(firsts.values())
        return cls(
            outcomes=outcomes,
            first=[firsts[o.lease] for o in outcomes],
            unique=[outcomes[i] for i in unique],
            results=[results[i] for i in unique],
        )

    def params(self) -> dict[str, object]:
        """finish_and_claim's write parameters (WRITE_PARAMS: one array per column).

        A column no write sets travels as NULL, not as an array of NULLs: the
        statement's unnest pads it with NULLs all the same, and a driver then
        has no array to build (psycopg adapts each element in Python: most
        batches leave six of the ten columns empty).
        """
        unique = self.unique
        return {
            "job_id": [o.lease.job_id for o in unique],
            "fencing_token": [o.lease.fencing_token for o in unique],
            "status": [o.status.value for o in unique],
            "result": _set_or_null(self.results),
            "error": _set_or_null([o.error for o in unique]),
            "error_class": _set_or_null([o.error_class for o in unique]),
            "result_ttl": _set_or_null([o.result_ttl for o in unique]),
            "finished_now": _set_or_null([o.now for o in unique]),
            "started_ago": _set_or_null([o.started_ago for o in unique]),
            "traceback": _set_or_null([o.traceback for o in unique]),
        }

    def lost(self, row: Row | None) -> list[Lease]:
        """The leases not written, given finish_and_claim's first row (None: no row at all)."""
        written = (
            set()
            if row is None
            else set(zip(row["finished_ids"], row["finished_tokens"], strict=True))
        )
        # A lease repeated in the batch is no longer held by its second write.
        return [
            o.lease
            for index, o in enumerate(self.outcomes)
            if self.first[index] != index or (o.lease.job_id, o.lease.fencing_token) not in written
        ]


async def write_finishes(driver: Driver, batch: FinishBatch) -> list[Lease]:
    """finish_and_claim with a claim of nothing: ``batch``'s writes; the leases not held."""
    if not batch.outcomes:
        return []
    rows = await driver.fetch("finish_and_claim", **batch.params(), **NO_CLAIM)
    return batch.lost(rows[0] if rows else None)


class FinishOps(StoreCore):
    async def finish(self, outcome: Finish) -> None:
        if await self.finish_many([outcome]):
            raise LeaseLost(outcome.lease.job_id, outcome.lease.fencing_token)

    async def finish_many(self, outcomes: Sequence[Finish]) -> list[Lease]:
        self._begin()
        return await write_finishes(self._driver, FinishBatch.of(outcomes))

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
            traceback=request.traceback,
            outcome=OUTCOME_SNOOZED if request.snooze else OUTCOME_RETRIED,
            started_ago=request.started_ago,
        )
        if row is None:
            raise LeaseLost(request.lease.job_id, request.lease.fencing_token)

    async def interrupt(self, request: Interruption) -> None:
        now = self._begin(request.now)
        check_aware_field("run_at", request.run_at)
        row = await self._driver.fetchrow(
            "interrupt_job",
            job_id=request.lease.job_id,
            fencing_token=request.lease.fencing_token,
            now=now,
            retryable=request.retryable,
            run_at=request.run_at,
            error=request.error,
            error_class=request.error_class,
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
