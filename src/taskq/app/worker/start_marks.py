"""Start marks: ``started_at`` for jobs that are still running a moment after they began.

A consumer runs a retryable job it took from the local queue as soon as it
takes it; it does not wait for a start mark first (jobs the claim started,
and gated ones, see ``start_gate``, have their mark already). Most jobs
finish quickly, and their terminal write carries how long ago they began
(``Finish.started_ago``), so they never need a mark of their own. Jobs still
running ``START_MARK_DELAY`` after they began are marked here in one batched
write per round, with the same ``started_ago`` correction, so an operator
sees a true ``started_at`` within a fraction of a second.

The mark matters to one other reader: the shutdown's drain re-pends this
worker's running jobs whose ``started_at`` is empty. So the drain first
empties the local queue, then calls :meth:`StartMarks.flush` (every job a
consumer holds gets its mark), and re-pends only when that flush landed;
what is left then are exactly the jobs that were still queued.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Final

from taskq.app.worker import events
from taskq.app.worker.state import ActiveJob
from taskq.app.worker.task_views import StartMarksView
from taskq.app.worker.waiting import LatchEvent, wait_event
from taskq.domain.errors import TaskQError
from taskq.ports.store_params import Finish

#: Seconds a job runs before it gets a start mark of its own.
START_MARK_DELAY: Final = 0.2


class StartMarks:
    """Tracks started jobs without a mark and marks those still running after the delay."""

    def __init__(self, state: StartMarksView, *, delay: float = START_MARK_DELAY) -> None:
        self.state = state
        self.delay = delay
        self._unmarked: dict[int, ActiveJob] = {}
        self._arrived = LatchEvent()

    def __repr__(self) -> str:
        return f"<StartMarks unmarked={len(self._unmarked)}>"

    def started(self, active: ActiveJob, *, marked: bool = False) -> None:
        """A consumer began ``active`` just now; ``marked``: its start is on record already
        (its claim or the start gate wrote it), so it needs no mark here."""
        active.started_mono = self.state.clock.monotonic()
        if marked:
            return
        self._unmarked[active.job.id] = active
        if not self._arrived.is_set():
            self._arrived.set()

    def ended(self, active: ActiveJob) -> None:
        """``active`` stopped running; its terminal write records its start."""
        self._unmarked.pop(active.job.id, None)

    def started_ago(self, active: ActiveJob) -> timedelta:
        """How long ago ``active`` began, for a write that records it."""
        return timedelta(seconds=max(self.state.clock.monotonic() - active.started_mono, 0.0))

    def restamp(self, finish: Finish) -> Finish:
        """``finish`` with ``started_ago`` measured now, as it leaves for the database.

        The completer's ``prepare``: a terminal write may wait for its round
        trip (a batch, a claim in flight, a retry after a failure), and the
        server subtracts ``started_ago`` from its clock when the write arrives,
        so measured when the job ended it would make ``started_at`` that much
        late. A job no longer unmarked got its start mark, which the write keeps.
        """
        if finish.started_ago is None:
            return finish
        lease = finish.lease
        active = self._unmarked.get(lease.job_id)
        if active is None or active.job.fencing_token != lease.fencing_token:
            return finish
        return finish.restamped(self.started_ago(active))

    async def run(self) -> None:
        """Mark jobs that outlive the delay until the shutdown completes."""
        state = self.state
        while not state.shutdown_event.is_set():
            await wait_event(state.clock, None, self._arrived, state.shutdown_event)
            if state.shutdown_event.is_set():
                return
            self._arrived.clear()
            if await wait_event(state.clock, self.delay, state.shutdown_event):
                return
            await self.flush(older_than=self.delay)
            if self._unmarked:
                self._arrived.set()  # younger jobs are waiting for their turn

    async def flush(self, *, older_than: float = 0.0) -> bool:
        """Mark every unmarked job that began at least ``older_than`` seconds ago.

        Returns False when the write failed (those jobs stay unmarked and are
        tried again next round).
        """
        state = self.state
        now = state.clock.monotonic()
        due = [a for a in self._unmarked.values() if now - a.started_mono >= older_than]
        if not due:
            return True
        try:
            lost = set(
                await state.write_bounds.command(
                    state.store.mark_started(
                        [a.job.lease for a in due],
                        started_ago=[
                            timedelta(seconds=max(now - a.started_mono, 0.0)) for a in due
                        ],
                    ),
                )
            )
        except TaskQError as exc:
            events.emit(
                events.JOB_WRITE_FAILED, logging.ERROR, write="start", jobs=len(due), error=str(exc)
            )
            return False
        for active in due:
            self._unmarked.pop(active.job.id, None)
            if active.job.lease in lost:
                self._lost(active)
        return True

    def _lost(self, active: ActiveJob) -> None:
        """The lease went while the job ran (reclaimed, or drained): ask it to stop."""
        if (
            active.job.id not in self.state.active
            or active.finishing
            or active.abandon_queued
            or active.cancel_reason == "lease_lost"
        ):
            return
        level = logging.INFO if self.state.stopping.in_progress else logging.WARNING
        events.emit(
            events.JOB_LEASE_LOST,
            level,
            job_id=active.job.id,
            fencing_token=active.job.fencing_token,
            write="start",
        )
        active.request_cancel("lease_lost")


__all__ = ["START_MARK_DELAY", "StartMarks"]
