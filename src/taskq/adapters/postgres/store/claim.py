"""JobClaimer on Postgres: the dispatch claim, start marks, release, drain.

A claim computes exactly what ``taskq.domain.dispatch.select_for_dispatch``
returns on the same data (see ``queries/claim.sql``). The common case, only
strict_fifo queues and no capped actor, is one round trip (``claim_fifo``;
on one queue ``finish_and_claim``, which also writes the terminal outcomes a
worker sends along with its claim, so a busy worker commits once per round);
when a round_robin queue or a capped actor is involved that statement claims
nothing and says so, and ``claim_mixed`` computes the full model. The store
remembers such requests and sends them straight to ``claim_mixed`` (one round
trip too) until it reports that the simple path would do again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Final

from taskq.adapters.postgres.driver import TransientConflict
from taskq.adapters.postgres.store.base import CONFLICT_RETRIES, StoreCore
from taskq.adapters.postgres.store.finish import FinishBatch, write_finishes
from taskq.adapters.postgres.store.rows import check_lease, claimed_from_row
from taskq.domain.errors import LeaseLost
from taskq.domain.job import ClaimedJob, Lease
from taskq.ports.store_params import ClaimRequest, Finish, aligned_started_ago

OUTCOME_RELEASED = "released"
#: How many (queues, actors) request shapes the store remembers as needing claim_mixed.
MIXED_SHAPES_KEPT: Final = 64
#: The constant row bound inside finish_and_claim (it keeps that statement's plan generic);
#: a larger claim on one queue runs claim_fifo instead.
CLAIM_BATCH_MAX: Final = 128
#: finish_and_claim's write parameters when there is nothing to write.
_NO_WRITES: Final = MappingProxyType(FinishBatch.of([]).params())


class ClaimOps(StoreCore):
    async def claim(self, request: ClaimRequest) -> list[ClaimedJob]:
        _, jobs = await self._finish_and_claim(None, request)
        return jobs

    async def finish_and_claim(
        self, finishes: Sequence[Finish], request: ClaimRequest
    ) -> tuple[list[Lease], list[ClaimedJob]]:
        return await self._finish_and_claim(FinishBatch.of(finishes), request)

    async def _finish_and_claim(
        self, batch: FinishBatch | None, request: ClaimRequest
    ) -> tuple[list[Lease], list[ClaimedJob]]:
        """The terminal writes of ``batch`` and the claim: one statement on one queue."""
        now = self._begin(request.now)
        writes = batch is not None and bool(batch.outcomes)
        # Duplicates would make one queue's scan count twice against the limit.
        queues = list(dict.fromkeys(request.queues))
        actors = list(dict.fromkeys(request.actors))
        if request.limit <= 0 or not queues or not actors:
            return await self._finish_only(batch), []
        check_lease(request.lease)
        params: dict[str, object] = {
            "now": now,
            "queues": queues,
            "actors": actors,
            "limit": request.limit,
            "worker_id": request.worker_id,
            "lease": request.lease,
            "start_now": max(request.start_now, 0),
        }
        shape = (tuple(queues), tuple(actors))
        lost: list[Lease] = []
        if shape not in self._mixed_claims:
            if len(queues) == 1 and request.limit <= CLAIM_BATCH_MAX:
                one = {key: value for key, value in params.items() if key != "queues"}
                writing = batch.params() if batch is not None and writes else _NO_WRITES
                rows = await self._driver.fetch(
                    "finish_and_claim", queue=queues[0], **one, **writing
                )
                if batch is not None and writes:
                    lost, batch = batch.lost(rows[0] if rows else None), None
            else:
                lost, batch = await self._finish_only(batch), None
                rows = await self._driver.fetch("claim_fifo", **params)
            if rows and rows[0]["simple"]:
                return lost, [claimed_from_row(row) for row in rows if row["id"] is not None]
        # A round_robin queue or a capped actor is involved (claim_fifo took nothing).
        if batch is not None:
            lost = await self._finish_only(batch)
        for attempt in range(CONFLICT_RETRIES):
            try:
                rows = await self._driver.fetch("claim_mixed", **params)
            except TransientConflict:
                # Two claims serialising on capped actors in another order; nothing was taken.
                if attempt + 1 == CONFLICT_RETRIES:
                    raise
                continue
            self._remember_shape(shape, mixed=not (rows and rows[0]["simple"]))
            return lost, [claimed_from_row(row) for row in rows if row["id"] is not None]
        raise AssertionError("unreachable")

    async def _finish_only(self, batch: FinishBatch | None) -> list[Lease]:
        return [] if batch is None else await write_finishes(self._driver, batch)

    def _remember_shape(
        self, shape: tuple[tuple[str, ...], tuple[str, ...]], *, mixed: bool
    ) -> None:
        """Remember which requests need claim_mixed, so they skip a claim_fifo that takes nothing.

        Only a round trip is at stake: claim_mixed is exact in the simple case
        too, and it reports when a request has become simple again.
        """
        if not mixed:
            self._mixed_claims.discard(shape)
            return
        if len(self._mixed_claims) >= MIXED_SHAPES_KEPT:
            self._mixed_claims.clear()
        self._mixed_claims.add(shape)

    async def mark_started(
        self,
        leases: Sequence[Lease],
        *,
        now: datetime | None = None,
        started_ago: Sequence[timedelta] | None = None,
    ) -> list[Lease]:
        at = self._begin(now)
        offsets = aligned_started_ago(leases, started_ago)
        if not leases:
            return []
        rows = await self._driver.fetch(
            "mark_started",
            now=at,
            job_id=[lease.job_id for lease in leases],
            fencing_token=[lease.fencing_token for lease in leases],
            started_ago=[None] * len(leases) if offsets is None else offsets,
        )
        held = {(row["id"], row["fencing_token"]) for row in rows}
        return [lease for lease in leases if (lease.job_id, lease.fencing_token) not in held]

    async def release(self, lease: Lease, *, delay: timedelta, now: datetime | None = None) -> None:
        at = self._begin(now)
        if delay < timedelta(0):
            raise ValueError(f"release delay must be >= 0, got {delay}")
        row = await self._driver.fetchrow(
            "reschedule_job",
            job_id=lease.job_id,
            fencing_token=lease.fencing_token,
            now=at,
            run_at=None,
            delay=delay,
            refund_attempt=True,
            snooze=False,
            error=None,
            error_class=None,
            traceback=None,
            outcome=OUTCOME_RELEASED,
            started_ago=None,  # released unrun: no start to record
        )
        if row is None:
            raise LeaseLost(lease.job_id, lease.fencing_token)

    async def drain_unstarted(self, worker_id: str, *, now: datetime | None = None) -> int:
        at = self._begin(now)
        drained: int = await self._driver.fetchval("drain_unstarted", worker_id=worker_id, now=at)
        return drained


__all__ = ["ClaimOps"]
