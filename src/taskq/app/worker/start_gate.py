"""The start gate: jobs that may run only once the database says they started.

When a worker dies (kill -9), the sweep tells jobs that never started from
jobs that did by ``started_at``: a job that never started keeps its attempt
and runs later; one that started counts the attempt, and a non-retryable one
that started ends crashed, never run twice. For that to hold, a job whose
second run must never happen needs its start on record *before* its actor
runs:

- a job claimed for a consumer that was waiting (``ClaimRequest.start_now``)
  is marked by the claim itself: no extra write, no wait;
- a job claimed ahead (it waited in the local queue) whose actor is
  ``non_retryable``, or that a dead worker already held unstarted
  (``ClaimedJob.reclaimed_unstarted``), is marked when a consumer takes it:
  :meth:`StartGate.mark` queues its lease, one batched ``mark_started`` round
  trip carries every mark queued meanwhile, and the consumer runs the job only
  if the mark found the lease still held.

Other claimed-ahead jobs run at once and are marked a moment later
(``start_marks``): a retryable job that dies in that moment is taken for
unstarted and runs again without losing an attempt, and is gated from then on,
so a job that kills its worker at once still uses up its attempts.

A mark that finds the lease gone (the shutdown's drain re-pended the job, or
the sweep reclaimed it) means someone else owns the job now: it is not run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final

from taskq.app.worker.batching import GroupCommit
from taskq.app.worker.store_roles import StartMarkStore
from taskq.app.worker.write_bounds import WriteBounds
from taskq.domain.job import ClaimedJob, Lease
from taskq.domain.retry import RetryPolicy

#: Most marks one round trip carries.
MAX_MARK_BATCH: Final = 100


def needs_gate(job: ClaimedJob, policy: RetryPolicy) -> bool:
    """Whether ``job`` must wait for its start mark before its actor runs."""
    if job.started:
        return False  # its claim marked it
    return policy.kind == "non_retryable" or job.reclaimed_unstarted > 0


class StartGate:
    """Batched ``mark_started`` writes that gated jobs wait for; run :meth:`run` as a task."""

    def __init__(
        self,
        store: StartMarkStore,
        bounds: WriteBounds | None = None,
        *,
        max_batch: int = MAX_MARK_BATCH,
    ) -> None:
        """``bounds``: each mark write is bounded by the command timeout (None: unbounded)."""
        self._store = store
        self._bounds = bounds
        self._marks: GroupCommit[Lease, bool] = GroupCommit(
            "start gate", self._flush, max_batch=max_batch
        )

    def __repr__(self) -> str:
        return f"<StartGate {self._marks!r}>"

    def mark(self, lease: Lease) -> asyncio.Future[bool]:
        """Queue ``lease``'s mark; the future says whether the lease was still held (and is
        now marked started), or fails with the store's error."""
        return self._marks.submit(lease)

    async def run(self) -> None:
        await self._marks.run()

    async def close(self, runner: asyncio.Task[None] | None) -> None:
        """Write what is queued, then stop."""
        await self._marks.close(runner)

    async def _flush(self, leases: Sequence[Lease]) -> list[bool | Exception]:
        marking = self._store.mark_started(leases)
        lost = set(await (marking if self._bounds is None else self._bounds.command(marking)))
        return [lease not in lost for lease in leases]


__all__ = ["MAX_MARK_BATCH", "StartGate", "needs_gate"]
