"""The consumers' write pipeline: how an attempt ended becomes a write, and its answer.

``OutcomeWrites.conclude`` turns an attempt's outcome into the retry policy's
decision (:func:`taskq.domain.retry.decide`) and writes it, shielded from
cancellation; ``LeaseLost`` is logged, never retried:

- a terminal outcome (succeeded, failed, cancelled) is queued on the completer,
  one batched ``finish_many`` (or ``finish_and_claim``, with the producer's next
  claim) per round across consumers; the consumer gets the write's future and
  takes its next job without waiting for it (unless too many writes are
  outstanding). A write the database failed is sent again with backoff while the
  heartbeat keeps the lease; one given up leaves the job to its lease
  (``unwritten``), and the leader's sweep;
- a retry, snooze or interruption is written at once (``reschedule``,
  ``interrupt``), and so is the release of a job whose actor this worker lacks.

Every write is bounded by ``WriteBounds``: a job's own by its lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from datetime import timedelta
from functools import partial
from typing import Final

from taskq.app.worker import attempt_log, attempt_span, events
from taskq.app.worker.batching import GroupCommit
from taskq.app.worker.hand_back import until_this_process_ends
from taskq.app.worker.refused_writes import FailedInstead, Written, finish_flush
from taskq.app.worker.start_marks import StartMarks
from taskq.app.worker.state import ActiveJob
from taskq.app.worker.store_roles import CompleterStore
from taskq.app.worker.task_views import ConsumerView
from taskq.app.worker.write_bounds import WriteBounds
from taskq.domain.cancel import consumer_skips_mark_cancelled
from taskq.domain.errors import LeaseLost, TaskQError
from taskq.domain.job import ClaimedJob
from taskq.domain.outcomes import (
    Cancel,
    Complete,
    Fail,
    Interrupt,
    Outcome,
    Retry,
    SnoozeUntil,
)
from taskq.domain.retry import decide
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish, Interruption, Reschedule

#: How long a job of an actor this worker does not know waits before it is offered again.
UNKNOWN_ACTOR_RELEASE_DELAY: Final = timedelta(seconds=10)
#: The write that gives a job back unrun (an actor this worker lacks).
RELEASE: Final = "release"
#: Seconds before a failed terminal write is sent again; doubles up to WRITE_RETRY_MAX.
WRITE_RETRY_FIRST: Final = 0.5
WRITE_RETRY_MAX: Final = 10.0

Completer = GroupCommit[Finish, Written]


def new_completer(
    store: CompleterStore, bounds: WriteBounds, marks: StartMarks, *, max_batch: int
) -> Completer:
    """The batched terminal writes of one worker's consumers, each round trip bounded
    by the lease (an outcome can be large, and given up means run again)."""
    return GroupCommit(
        "completions",
        finish_flush(store, bound=bounds.job),
        max_batch=max_batch,
        prepare=marks.restamp,
    )


class OutcomeWrites:
    """Writes the outcomes of one worker's attempts (see the module docstring)."""

    def __init__(self, state: ConsumerView, *, completer: Completer, marks: StartMarks) -> None:
        self.state = state
        self.completer = completer
        self.marks = marks
        #: The consumers' own part of the state: what is being written, what did not land.
        self.ledger = state.ledger
        self._bounds = state.write_bounds
        self._retries: set[asyncio.Task[None]] = set()

    async def release_unknown(self, job: ClaimedJob) -> None:
        """Give back a job whose actor this worker lacks, for another worker to run."""
        events.emit(
            events.DISPATCH_ACTOR_NOT_FOUND,
            logging.ERROR,
            job_id=job.id,
            actor=job.actor,
            queue=job.queue,
            registered=sorted(self.state.registry),
            release_delay_seconds=UNKNOWN_ACTOR_RELEASE_DELAY.total_seconds(),
        )
        await self._guarded_write(
            job, RELEASE, self.state.store.release(job.lease, delay=UNKNOWN_ACTOR_RELEASE_DELAY)
        )

    async def conclude(self, active: ActiveJob, outcome: Outcome) -> asyncio.Future[Written] | None:
        """Write how the attempt ended; a terminal write is returned unawaited."""
        job, state = active.job, self.state
        decision = decide(
            active.ref.retry,
            attempt=max(job.attempt, 1),
            outcome=outcome,
            now=state.clock.now(),
            schedule_to_close=job.schedule_to_close,
            max_retry_backoff=state.settings.max_retry_backoff,
            rng=state.rng.uniform,
        )
        attempt_log.concluded(active, outcome, decision, state)
        if active.span is not None:
            attempt_span.end(active.span, outcome, decision, abandoned=active.abandon_queued)
        # A job turned away before its actor ran (invalid payload, a limit) did not start.
        started_ago = self.marks.started_ago(active) if active.task is not None else None
        ran = None if started_ago is None else started_ago.total_seconds()
        if ran is not None:
            state.claim_pace.job_ran(ran)
        state.metrics.attempt_ended(
            job.actor,
            job.queue,
            attempt_span.ABANDONED
            if active.abandon_queued
            else attempt_span.OUTCOMES[decision.__class__],
            ran,
        )
        state.active.remove(job.id)
        if active.abandon_queued or (
            isinstance(decision, Cancel)
            and consumer_skips_mark_cancelled(state.watch.cancel_controller.phase_of(job.id))
        ):
            self.marks.ended(active)
            return None  # the abandonment owns the write
        active.finishing = True
        # The job stays with the start marks until its write is answered: its row is
        # still running until then, and a drain must not take it for an unstarted one.
        if isinstance(decision, Complete | Fail | Cancel):
            self.ledger.writes_in_flight += 1
            finish = finish_of(active, decision, started_ago)
            return self._submit(active, finish, type(decision).__name__, 0)
        try:
            if isinstance(decision, Interrupt):
                await self._interrupt(active, decision, started_ago)
            else:
                reschedule = self._reschedule(active, decision, started_ago)
                await self._guarded_write(job, type(decision).__name__, reschedule)
        finally:
            self.marks.ended(active)
        return None

    async def _interrupt(
        self, active: ActiveJob, decision: Interrupt, started_ago: timedelta | None
    ) -> None:
        """Hand an interrupted job back: waiting again (retryable) or abandoned."""
        job, state = active.job, self.state
        run_at = state.clock.now()
        if active.forced and not getattr(active.ref, "is_async", True):
            # Its task is cancelled but a thread cannot be: the code may run on here.
            run_at += until_this_process_ends(state)
        request = Interruption(
            lease=job.lease,
            retryable=decision.retryable,
            run_at=run_at,
            error_class=decision.error_class,
            error=decision.error,
            started_ago=started_ago,
        )
        if await self._guarded_write(job, "Interrupt", state.store.interrupt(request)):
            log_interrupted(active, decision.retryable, decision.error)

    def _submit(
        self, active: ActiveJob, finish: Finish, what: str, retries: int
    ) -> asyncio.Future[Written]:
        """Queue ``finish`` for the next batched write; ``_written`` handles the answer."""
        self.ledger.writing.add(active.job.id)
        write = self.completer.submit(finish)
        write.add_done_callback(partial(self._written, active, finish, what, retries))
        return write

    def _written(
        self,
        active: ActiveJob,
        finish: Finish,
        what: str,
        retries: int,
        done: asyncio.Future[Written],
    ) -> None:
        """A batched terminal write was answered: count it, retry it, or say why it did not land."""
        state, job = self.state, active.job
        if (
            not done.cancelled()
            and isinstance(done.exception(), TaskQError)
            and not state.shutdown_event.is_set()
        ):
            # The database failed, not the job: the outcome is kept and written again
            # (the heartbeat keeps the lease meanwhile); a lost lease ends the retries.
            delay = min(WRITE_RETRY_FIRST * 2**retries, WRITE_RETRY_MAX)
            events.emit(
                events.JOB_WRITE_FAILED,
                logging.ERROR,
                job_id=job.id,
                write=what,
                error=str(done.exception()),
                retry_in=delay,
            )
            task = asyncio.create_task(self._retry(active, finish, what, retries + 1, delay))
            self._retries.add(task)
            task.add_done_callback(self._retries.discard)
            return
        self.marks.ended(active)
        ledger = self.ledger
        ledger.writes_in_flight -= 1
        ledger.writing.discard(job.id)
        if done.cancelled() or done.exception() is not None:
            # It ran; its lease and the sweep decide what follows.
            ledger.unwritten.add(job.lease)
        if done.cancelled():
            events.emit(
                events.JOB_WRITE_FAILED,
                logging.ERROR,
                job_id=job.id,
                write=what,
                error="the write was cancelled",
            )
            return
        exc = done.exception()
        if exc is not None:
            # A bug, or the worker is stopping: the lease expires and the sweep reclaims it.
            events.emit(
                events.JOB_WRITE_FAILED,
                logging.ERROR,
                job_id=job.id,
                write=what,
                error=str(exc) if isinstance(exc, TaskQError) else f"{type(exc).__name__}: {exc}",
            )
            return
        answer = done.result()
        if isinstance(answer, FailedInstead):  # the store could not keep the outcome
            what, answer = "Fail", answer.lost
        if answer:
            events.emit(
                events.JOB_LEASE_LOST,
                logging.WARNING,
                job_id=job.id,
                fencing_token=job.fencing_token,
                write=what,
            )
        elif what == "Fail":
            self.ledger.drain_failures += 1

    async def _retry(
        self, active: ActiveJob, finish: Finish, what: str, retries: int, delay: float
    ) -> None:
        try:
            await self.state.clock.sleep(delay)
        except asyncio.CancelledError:
            # The worker stopped first: the job is left to its lease and the sweep.
            self.marks.ended(active)
            self.ledger.writes_in_flight -= 1
            self.ledger.writing.discard(active.job.id)
            self.ledger.unwritten.add(active.job.lease)
            raise
        self._submit(active, finish, what, retries)

    async def close(self) -> None:
        """Stop pending write retries (their jobs are left to their leases)."""
        for task in list(self._retries):
            task.cancel()
        await asyncio.gather(*self._retries, return_exceptions=True)

    @staticmethod
    async def settle(write: asyncio.Future[Written]) -> None:
        """Wait for a batched write to be answered (its outcome is logged by ``_written``)."""
        with contextlib.suppress(Exception):
            await asyncio.shield(write)

    async def _reschedule(
        self, active: ActiveJob, decision: Retry | SnoozeUntil, started_ago: timedelta | None
    ) -> None:
        job = active.job
        if isinstance(decision, SnoozeUntil):
            request = Reschedule(
                lease=job.lease,
                run_at=decision.run_at,
                refund_attempt=True,
                snooze=True,
                started_ago=started_ago,
            )
        else:
            request = Reschedule(
                lease=job.lease,
                run_at=decision.run_at,
                refund_attempt=decision.refund_attempt,
                error=decision.error,
                error_class=decision.error_class,
                traceback=decision.traceback,
                started_ago=started_ago,
            )
        await self.state.store.reschedule(request)

    async def _guarded_write(self, job: ClaimedJob, what: str, write: Awaitable[object]) -> bool:
        """Await an owner write shielded from cancellation; True when it landed."""
        self.ledger.writing.add(job.id)
        try:
            # Bounded by the lease, so a network that stopped answering cannot hold the
            # slot for the kernel's TCP timeouts; past the shutdown, given up on sooner
            # still. What did not land is left to the lease.
            await self._bounds.job_write(write)
        except LeaseLost:
            events.emit(
                events.JOB_LEASE_LOST,
                logging.WARNING,
                job_id=job.id,
                fencing_token=job.fencing_token,
                write=what,
            )
            return False
        except Exception as exc:
            # Not retried: the lease expires and the leader's sweep reclaims the job.
            if what != RELEASE:
                # It ran: not the heartbeat's orphan to give back.
                self.ledger.unwritten.add(job.lease)
            events.emit(
                events.JOB_WRITE_FAILED,
                logging.ERROR,
                # A bug deserves its traceback; a write given up at shutdown does not.
                exc_info=not isinstance(exc, TaskQError | TimeoutError),
                job_id=job.id,
                write=what,
                error=str(exc),
            )
            return False
        finally:
            self.ledger.writing.discard(job.id)
        return True


def finish_of(
    active: ActiveJob, decision: Complete | Fail | Cancel, started_ago: timedelta | None
) -> Finish:
    """The terminal write ``decision`` asks for."""
    job, ref = active.job, active.ref
    if isinstance(decision, Complete):
        return Finish(
            lease=job.lease,
            status=JobStatus.SUCCEEDED,
            result=decision.result,
            result_ttl=ref.result_ttl,
            started_ago=started_ago,
        )
    if isinstance(decision, Fail):
        return Finish(
            lease=job.lease,
            status=JobStatus.FAILED,
            error=decision.error,
            error_class=decision.error_class,
            traceback=decision.traceback,
            result_ttl=ref.result_ttl,
            started_ago=started_ago,
        )
    message = (
        "cancel requested; still running after cancellation_grace_period, task cancelled"
        if active.forced
        else "cancel requested"
    )
    return Finish(
        lease=job.lease, status=JobStatus.CANCELLED, error=message, started_ago=started_ago
    )


def log_interrupted(active: ActiveJob, retryable: bool, why: str) -> None:
    """Say what became of an interrupted job: waiting again, or abandoned (non-retryable)."""
    if retryable:
        events.emit(
            # INFO: every deploy interrupts jobs this way, and each simply runs again.
            events.JOB_INTERRUPTED,
            logging.INFO,
            **attempt_log.job_fields(active),
            reason=why,
            then="waits again; the attempt is not counted",
        )
    else:
        events.emit(
            events.JOB_ABANDONED,
            logging.ERROR,
            **attempt_log.job_fields(active),
            reason=why,
            then="abandoned: a non_retryable job never runs twice",
        )


__all__ = [
    "RELEASE",
    "UNKNOWN_ACTOR_RELEASE_DELAY",
    "Completer",
    "OutcomeWrites",
    "finish_of",
    "log_interrupted",
    "new_completer",
]
