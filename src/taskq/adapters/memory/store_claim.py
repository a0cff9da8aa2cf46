"""JobClaimer for the memory store: exclusive claims in dispatch order, drain, release."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime, timedelta

from taskq.adapters.memory.store_base import OUTCOME_RELEASED, StoreCore, lease_until
from taskq.domain.actor_config import QueueMode
from taskq.domain.dispatch import (
    DispatchCandidate,
    advance_cursors,
    residual_capacity,
    select_for_dispatch,
)
from taskq.domain.job import ClaimedJob, Lease
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, aligned_started_ago


class ClaimOps(StoreCore):
    async def claim(self, request: ClaimRequest) -> list[ClaimedJob]:
        return self._claim_now(request, await self._begin(request.now))

    def _claim_now(self, request: ClaimRequest, now: datetime) -> list[ClaimedJob]:
        """claim after ``_begin``: no await, so it is atomic with what precedes it."""
        if request.limit <= 0:
            return []
        expires = lease_until(now, request.lease)
        queues, actors = set(request.queues), set(request.actors)
        max_concurrent = {
            actor: config.max_concurrent
            for actor in actors
            if (config := self._db.actor_configs.get(actor)) is not None
        }
        residual = residual_capacity(max_concurrent, self._db.running_counts(max_concurrent))
        modes = self._db.queue_modes
        due_rows = (
            row
            for row in self._db.pending_in_dispatch_order(queues)
            if row.actor in actors and row.scheduled_at <= now
        )
        if all(cap is None for cap in residual.values()) and not any(
            modes.get(queue) is QueueMode.ROUND_ROBIN for queue in queues
        ):
            # No cap and no round-robin: the model is FIFO order, so only the first
            # ``limit`` due rows can be chosen (claim_fifo's shortcut in SQL), read from
            # the head of the dispatch index.
            due = list(itertools.islice(due_rows, request.limit))
        else:
            due = list(due_rows)
        if not due:
            return []
        candidates = [
            DispatchCandidate(
                id=row.id,
                queue=row.queue,
                actor=row.actor,
                priority=row.priority,
                scheduled_at=row.scheduled_at,
                fairness_key=row.fairness_key,
            )
            for row in due
        ]
        chosen = select_for_dispatch(
            candidates,
            modes=modes,
            residual=residual,
            limit=request.limit,
            cursors=self._db.rr_cursors,
        )
        self._db.rr_cursors = advance_cursors(
            self._db.rr_cursors, ((c.queue, c.fairness_key) for c in chosen), modes
        )
        claimed: list[ClaimedJob] = []
        for index, candidate in enumerate(chosen):
            row = self._db.jobs[candidate.id]
            self._db.move(row, JobStatus.RUNNING)
            row.locked_by = request.worker_id
            row.lock_expires_at = expires
            row.fencing_token = self._db.next_fencing_token()
            row.attempt += 1
            # Started now only where a consumer waits for it; the rest get their mark
            # (mark_started) before they run: an empty started_at means never run.
            row.started_at = now if index < request.start_now else None
            claimed.append(row.to_claimed())
        return claimed

    async def mark_started(
        self,
        leases: Sequence[Lease],
        *,
        now: datetime | None = None,
        started_ago: Sequence[timedelta] | None = None,
    ) -> list[Lease]:
        at = await self._begin(now)
        offsets = aligned_started_ago(leases, started_ago)
        lost: list[Lease] = []
        for index, lease in enumerate(leases):
            row = self._owned(lease)
            if row is None:
                lost.append(lease)
            elif row.started_at is None:
                row.started_at = at if offsets is None else at - offsets[index]
        return lost

    async def release(self, lease: Lease, *, delay: timedelta, now: datetime | None = None) -> None:
        at = await self._begin(now)
        if delay < timedelta(0):
            raise ValueError(f"release delay must be >= 0, got {delay}")
        row = self._require_owned(lease)
        self._record_attempt(row, outcome=OUTCOME_RELEASED, now=at)
        self._wait_again(row, run_at=at + delay, now=at, refund_attempt=True)

    async def drain_unstarted(self, worker_id: str, *, now: datetime | None = None) -> int:
        at = await self._begin(now)
        drained = 0
        for row in list(self._db.rows_with_status(JobStatus.RUNNING)):
            if row.locked_by == worker_id and row.started_at is None:
                # Back to pending where it was in line (cancelled if asked to stop);
                # the attempt never ran.
                row.attempt = max(row.attempt - 1, 0)
                if not self._cancel_instead(row, at):
                    self._db.move(row, JobStatus.PENDING)
                    row.clear_lock()
                drained += 1
        return drained
