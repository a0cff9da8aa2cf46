"""Consumer loops: take a claimed job off the local queue, run it, write what happened.

Dispatch sequence of one job (the worker guide's, in order):

1. actor lookup: unknown → ``dispatch-actor-not-found``, released back (10 s);
2. start mark (batched; a lease already lost skips the job). A consumer
   takes its next job, and sends that job's start mark, while its previous
   job's outcome is being written; the job still waits for the mark;
3. payload validation: failure → ``failed``, never retried, message stored;
4. DI scope + ``JobContext`` with a fresh ``cancel_event``;
5. invocation in its own task (so a forced cancel never kills the consumer);
6. outcome → :func:`taskq.domain.retry.decide` → finish or reschedule,
   shielded from cancellation; ``LeaseLost`` is logged, never retried;
7. TRANSIENT scope teardown (the scope's ``async with`` around the invocation).

How an attempt that was asked to stop ends (``ctx.cancel_event`` records
whether the actor saw the request: read ``ctx.cancelled`` or awaited it):

- the task was force-cancelled (cancel grace over, or shutdown FORCING, which
  persists cancel phase FORCED) → ``cancelled``;
- cancel requested through the API, and the actor returned after seeing it,
  or raised → ``cancelled``; returned without seeing it → as it ended
  (``succeeded``: the work was done);
- the *shutdown* asked, and the actor returned after seeing it → rescheduled
  at once without using an attempt (error class ``WorkerShutdown``): the
  worker's own shutdown is not the job's failure, another worker runs it; a
  job that finished without looking, or raised, ends as it would have;
- the abandonment was already queued → no write at all (the heartbeat or the
  shutdown owns that terminal write; one terminal outcome per attempt).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from taskq.app.context import JobContext
from taskq.app.worker import events
from taskq.app.worker.batching import GroupCommit
from taskq.app.worker.protocols import ActorLike, ActorScopes
from taskq.app.worker.state import ActiveJob, WorkerState
from taskq.app.worker.waiting import until_done_or
from taskq.domain.cancel import consumer_skips_mark_cancelled
from taskq.domain.errors import LeaseLost, PayloadValidationError, TaskQError
from taskq.domain.job import ClaimedJob, Lease
from taskq.domain.outcomes import (
    Cancel,
    CancelledByRequest,
    Complete,
    Fail,
    Outcome,
    PayloadInvalid,
    Raised,
    RetriedAfter,
    Retry,
    RetryAfter,
    Snooze,
    SnoozeUntil,
    Succeeded,
    outcome_from_exception,
)
from taskq.domain.retry import decide
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish, Reschedule

#: How long a job of an actor this worker does not know waits before it is offered again.
UNKNOWN_ACTOR_RELEASE_DELAY: Final = timedelta(seconds=10)
#: Error class recorded on an attempt interrupted by the worker's own shutdown.
WORKER_SHUTDOWN: Final = "WorkerShutdown"
_SHUTDOWN_MESSAGE: Final = "interrupted by worker shutdown; rescheduled without using an attempt"

Starter = GroupCommit[Lease, bool]
Completer = GroupCommit[Finish, bool]


class Dispatcher:
    """Runs jobs for the consumer loops of one worker."""

    def __init__(
        self, state: WorkerState, scopes: ActorScopes, *, starter: Starter, completer: Completer
    ) -> None:
        self.state = state
        self.scopes = scopes
        self.starter = starter
        self.completer = completer

    # -- the loop ------------------------------------------------------------------------

    async def run_consumer(self) -> None:
        """Dispatch jobs until the shutdown event; returns cleanly then."""
        # At most one job taken ahead while the previous one's outcome is written.
        ahead: list[_Taken] = []
        try:
            while True:
                if ahead:
                    taken = ahead.pop()
                    if self.state.shutdown_event.is_set():
                        # The shutdown is over: left to its lease and the sweep.
                        self.state.active.leave()
                        return
                else:
                    job = await self._next_job()
                    if job is None:
                        return
                    taken = self._take(job)
                await self._run(taken, ahead)
        finally:
            for _ in ahead:
                self.state.active.leave()  # taken ahead, never run: the sweep reclaims it

    async def _next_job(self) -> ClaimedJob | None:
        state = self.state
        if state.shutdown_event.is_set():
            return None
        try:
            job = state.local_queue.get_nowait()
        except asyncio.QueueEmpty:
            getter = asyncio.create_task(state.local_queue.get())
            try:
                got = await until_done_or(getter, state.shutdown_event)
            finally:
                if not getter.done():
                    getter.cancel()  # Queue.get leaves the item queued when cancelled
            if not got:
                return None
            job = getter.result()
        self._slot_taken()
        return job

    def _slot_taken(self) -> None:
        queue = self.state.local_queue
        if queue.maxsize - queue.qsize() >= self.state.claim_threshold:
            self.state.slot_freed.set()  # only a wake-up worth a claim

    def _take_ahead(self, ahead: list[_Taken]) -> None:
        """Take the next queued job and send its start mark now, beside this job's outcome.

        The two writes then share one round trip's wait instead of two in turn.
        The taken job still runs only once its start mark is confirmed, so a
        drain that re-pends it first is seen (lease lost) exactly as before.
        """
        state = self.state
        if ahead or state.shutdown_in_progress:
            return
        try:
            job = state.local_queue.get_nowait()
        except asyncio.QueueEmpty:
            return
        self._slot_taken()
        ahead.append(self._take(job))

    # -- one job -------------------------------------------------------------------------

    async def dispatch(self, job: ClaimedJob) -> None:
        """Run one claimed job to a written outcome (or a logged reason why not)."""
        await self._run(self._take(job), None)

    def _take(self, job: ClaimedJob) -> _Taken:
        """Count the job as held and, for a known actor, submit its start mark."""
        self.state.active.enter()
        ref = self.state.registry.get(job.actor)
        return _Taken(job, ref, None if ref is None else self.starter.submit(job.lease))

    async def _run(self, taken: _Taken, ahead: list[_Taken] | None) -> None:
        state = self.state
        job, ref = taken.job, taken.ref
        try:
            if ref is None or taken.started is None:
                await self._release_unknown(job)
                return
            if not await self._mark_started(job, taken.started):
                return
            active = ActiveJob(job, ref)
            state.active.add(active)
            # A shutdown already cancelling covers jobs that start after it began.
            if state.shutdown_cancel == "cooperative":
                active.request_cancel("shutdown")
            elif state.shutdown_cancel == "forced":
                active.force_cancel("shutdown")
            try:
                ended = await self._execute(active)
                if ended is not None:
                    await self._conclude(active, *ended, ahead=ahead)
            finally:
                state.active.remove(job.id)
        finally:
            state.active.leave()

    async def _release_unknown(self, job: ClaimedJob) -> None:
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
            job, "release", self.state.store.release(job.lease, delay=UNKNOWN_ACTOR_RELEASE_DELAY)
        )

    async def _mark_started(self, job: ClaimedJob, started: asyncio.Future[bool]) -> bool:
        try:
            lost = await asyncio.shield(started)
        except Exception as exc:
            # Unconfirmed ownership: running it could duplicate work a drain re-pends.
            events.emit(
                events.JOB_WRITE_FAILED,
                logging.ERROR,
                exc_info=not isinstance(exc, TaskQError),
                job_id=job.id,
                write="start",
                error=str(exc),
            )
            await self._guarded_write(
                job, "release", self.state.store.release(job.lease, delay=timedelta(0))
            )
            return False
        if lost:
            # During a shutdown the drain re-pended it: expected, not a warning.
            level = logging.INFO if self.state.shutdown_in_progress else logging.WARNING
            events.emit(
                events.JOB_LEASE_LOST,
                level,
                job_id=job.id,
                fencing_token=job.fencing_token,
                write="start",
            )
            return False
        return True

    async def _execute(self, active: ActiveJob) -> tuple[Outcome, bool] | None:
        """Run the actor: (outcome, interrupted by shutdown), or None when the
        worker stopped waiting for it (the shutdown completed without it)."""
        job, ref = active.job, active.ref
        try:
            payload = ref.validate_payload(job.payload)
            ctx = self._context(active, payload)
        except PayloadValidationError as exc:
            return PayloadInvalid(str(exc)), False
        except Exception as exc:
            # A model validator that raised something else: the same payload will again.
            return Raised.from_exception(exc, retryable=False), False
        task = asyncio.create_task(self._invoke(ref, payload, ctx), name=f"taskq-job-{job.id}")
        active.task = task
        if active.forced:  # forced before the task existed
            task.cancel()
        try:
            finished = await until_done_or(task, self.state.shutdown_event)
        except BaseException:
            task.cancel()
            raise
        if not finished:
            # Shutdown is complete (or the worker is isolating): this job was
            # abandoned or lost; stop waiting for it.
            task.cancel()
            return None
        return _outcome_of(active, task)

    def _context(self, active: ActiveJob, payload: Any) -> JobContext[Any]:
        return JobContext.for_claimed(
            active.job, payload, worker_id=self.state.worker_id, cancel_event=active.cancel_event
        )

    async def _invoke(self, ref: ActorLike, payload: Any, ctx: JobContext[Any]) -> Any:
        async with self.scopes.actor_scope(ref) as deps:
            return await ref.run(payload, ctx, deps)

    async def _conclude(
        self,
        active: ActiveJob,
        outcome: Outcome,
        interrupted: bool,
        *,
        ahead: list[_Taken] | None = None,
    ) -> None:
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
        if active.abandon_queued or (
            isinstance(decision, Cancel)
            and consumer_skips_mark_cancelled(state.cancel_controller.phase_of(job.id))
        ):
            return  # the abandonment owns the terminal write
        active.finishing = True
        if ahead is not None:
            self._take_ahead(ahead)
        write: Awaitable[object]
        if isinstance(decision, Complete | Fail | Cancel):
            # A future, not a coroutine, is shielded: no task per job.
            write = _lease_checked(job, self.completer.submit(_finish_of(active, decision)))
        else:
            write = self._reschedule(active, decision, interrupted)
        written = await self._guarded_write(job, type(decision).__name__, write)
        if written and isinstance(decision, Fail):
            state.drain_failures += 1

    async def _reschedule(
        self, active: ActiveJob, decision: Retry | SnoozeUntil, interrupted: bool
    ) -> None:
        job = active.job
        if isinstance(decision, SnoozeUntil):
            request = Reschedule(
                lease=job.lease, run_at=decision.run_at, refund_attempt=True, snooze=True
            )
        else:
            request = Reschedule(
                lease=job.lease,
                run_at=decision.run_at,
                refund_attempt=decision.refund_attempt,
                error=_SHUTDOWN_MESSAGE if interrupted else decision.error,
                error_class=WORKER_SHUTDOWN if interrupted else decision.error_class,
            )
        await self.state.store.reschedule(request)

    async def _guarded_write(self, job: ClaimedJob, what: str, write: Awaitable[object]) -> bool:
        """Await an owner write shielded from cancellation; True when it landed."""
        try:
            await asyncio.shield(write)
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
            events.emit(
                events.JOB_WRITE_FAILED,
                logging.ERROR,
                exc_info=not isinstance(exc, TaskQError),  # a bug deserves its traceback
                job_id=job.id,
                write=what,
                error=str(exc),
            )
            return False
        return True


@dataclass(frozen=True, slots=True)
class _Taken:
    """A job a consumer took off the local queue, with its start mark (None: unknown actor)."""

    job: ClaimedJob
    ref: ActorLike | None
    started: asyncio.Future[bool] | None


def _outcome_of(active: ActiveJob, task: asyncio.Task[Any]) -> tuple[Outcome, bool]:
    """How the attempt ended, given why (and whether) it was asked to stop.

    The flag is true when the attempt was interrupted by the worker's shutdown
    (rescheduled without using an attempt).
    """
    if task.cancelled():
        return CancelledByRequest(), False
    reason = active.cancel_reason
    exc = task.exception()
    if exc is None:
        if reason is not None and active.cancel_event.observed:
            # A cooperative early return: the actor saw the request and stopped.
            if reason == "shutdown":
                return RetriedAfter(timedelta(0), consume_budget=False), True
            return CancelledByRequest(), False
        try:
            # Finished without looking at the request: the work is done.
            return Succeeded(active.ref.dump_result(task.result())), False
        except Exception as dump_error:
            # The same result will not serialise next time either.
            return Raised.from_exception(dump_error, retryable=False), False
    if not isinstance(exc, Exception):
        raise exc  # KeyboardInterrupt / SystemExit from an actor: let the process go down
    if reason == "request":
        return CancelledByRequest(), False
    if isinstance(exc, Snooze | RetryAfter):
        return outcome_from_exception(exc), False
    retryable = not isinstance(exc, PayloadValidationError)
    return Raised.from_exception(exc, retryable=retryable), False


def _finish_of(active: ActiveJob, decision: Complete | Fail | Cancel) -> Finish:
    """The terminal write ``decision`` asks for."""
    job, ref = active.job, active.ref
    if isinstance(decision, Complete):
        return Finish(
            lease=job.lease,
            status=JobStatus.SUCCEEDED,
            result=decision.result,
            result_ttl=ref.result_ttl,
        )
    if isinstance(decision, Fail):
        return Finish(
            lease=job.lease,
            status=JobStatus.FAILED,
            error=decision.error,
            error_class=decision.error_class,
            result_ttl=ref.result_ttl,
        )
    return Finish(lease=job.lease, status=JobStatus.CANCELLED, error=_cancel_message(active))


def _lease_checked(job: ClaimedJob, lost: asyncio.Future[bool]) -> asyncio.Future[None]:
    """A future failing with ``LeaseLost`` when the batched write reports the lease lost."""
    checked: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def relay(done: asyncio.Future[bool]) -> None:
        if checked.done():
            return
        if done.cancelled():
            checked.cancel()
        elif (exc := done.exception()) is not None:
            checked.set_exception(exc)
        elif done.result():
            checked.set_exception(LeaseLost(job.id, job.fencing_token))
        else:
            checked.set_result(None)

    lost.add_done_callback(relay)
    return checked


def _cancel_message(active: ActiveJob) -> str:
    if active.cancel_reason == "shutdown":
        return "cancelled by worker shutdown: still running after cancellation_grace_period"
    if active.forced:
        return "cancel requested; still running after cancellation_grace_period, task cancelled"
    return "cancel requested"


__all__ = [
    "UNKNOWN_ACTOR_RELEASE_DELAY",
    "WORKER_SHUTDOWN",
    "Completer",
    "Dispatcher",
    "Starter",
]
