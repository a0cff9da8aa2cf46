"""Consumer loops: take a claimed job off the local queue, run it, write what happened.

Dispatch sequence of one job (the worker guide's, in order):

1. actor lookup: unknown → ``dispatch-actor-not-found``, released back (10 s);
2. its CONSUMER span starts when the worker traces (``attempt_span``: ended
   when the outcome is decided, current in the actor's task);
   registered as active; a job the claim did not start gets its start mark
   only if it is still running a moment later (``start_marks``), the terminal
   write otherwise records when it began;
3. payload validation: failure → ``failed``, never retried, message stored;
4. DI scope + ``JobContext`` with a fresh ``cancel_event``;
5. the start gate: a claimed-ahead job of a non_retryable actor (or one a dead
   worker held unstarted) runs only once its batched ``mark_started`` found
   the lease held (``start_gate``), so a crash can never make it run twice;
   a job whose cancel a heartbeat delivered meanwhile (during the mark, or the
   wait for its limits) is not invoked: it ends ``cancelled``;
6. invocation in its own task (so a forced cancel never kills the consumer);
   on Python 3.12+ the task starts eagerly: an actor that never suspends
   is done when its task is created, without an event-loop turn;
7. outcome → :func:`taskq.domain.retry.decide` → finish, reschedule or
   interrupt, shielded from cancellation; ``LeaseLost`` is logged, never retried.
   Terminal writes are batched across consumers (group commit) and the
   consumer takes its next job without waiting for its write to land
   (unless too many writes are outstanding): the write then holds the
   lease, the slot is free for the next job;
8. TRANSIENT scope teardown (the scope's ``async with`` around the invocation).

How an attempt that was asked to stop ends (``ctx.cancel_event`` records
whether the actor saw the request: read ``ctx.cancelled`` or awaited it):

- its timeout or its job's deadline (``timeouts``, armed in step 6 for a
  bounded attempt only): the actor returned after seeing it, raised after
  seeing it, its task was force-cancelled, or the worker gave up on it →
  ``AttemptTimeout`` / ``DeadlineExceeded``, an error the retry policy
  decides on; returned without seeing it → as it ended;

- a user's cancel (through the API): the actor returned after seeing it,
  raised, or its task was force-cancelled → ``cancelled``; returned without
  seeing it → as it ended (``succeeded``: the work was done);
- the worker's own *shutdown* asked (or its lease was lost): the actor
  returned after seeing it, raised after seeing it, or its task was
  force-cancelled → interrupted (``Interrupted`` → ``JobFinisher.interrupt``):
  a retryable job waits again with its attempt refunded, a non-retryable one
  is abandoned; never ``cancelled``, which only a user asks for. A job that
  finished without looking ends as it would have;
- the abandonment was already queued → no write at all (the heartbeat or the
  shutdown owns that write; one outcome per attempt).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from functools import partial
from typing import Any, Final

from taskq.app.context import JobContext
from taskq.app.observability.tracing import Tracing
from taskq.app.worker import attempt_log, attempt_span, events
from taskq.app.worker.actor_threads import ActorThreads, ThreadHooks
from taskq.app.worker.batching import GroupCommit
from taskq.app.worker.exit_guard import JOB_TASK_PREFIX
from taskq.app.worker.hand_back import until_this_process_ends
from taskq.app.worker.limits import NO_LIMITS, ActorLimits, Denied, declares_limits
from taskq.app.worker.protocols import ActorScopes
from taskq.app.worker.refused_writes import FailedInstead, Written
from taskq.app.worker.start_gate import StartGate, needs_gate
from taskq.app.worker.start_marks import StartMarks
from taskq.app.worker.state import ActiveJob, WorkerState
from taskq.app.worker.timeouts import TIMED_OUT_REASONS, AttemptTimers, timed_out
from taskq.app.worker.waiting import bounded_store_call, kept, until_stopped
from taskq.domain.cancel import consumer_skips_mark_cancelled
from taskq.domain.errors import LeaseLost, PayloadValidationError, TaskQError
from taskq.domain.job import ClaimedJob
from taskq.domain.outcomes import (
    Cancel,
    CancelledByRequest,
    Complete,
    Fail,
    Interrupt,
    Interrupted,
    LateStart,
    Outcome,
    PayloadInvalid,
    Raised,
    Retry,
    RetryAfter,
    Snooze,
    Snoozed,
    SnoozeUntil,
    Succeeded,
    outcome_from_exception,
)
from taskq.domain.retry import decide
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish, Interruption, Reschedule

#: How long a job of an actor this worker does not know waits before it is offered again.
UNKNOWN_ACTOR_RELEASE_DELAY: Final = timedelta(seconds=10)
#: Error class recorded on an attempt interrupted by the worker's own shutdown.
WORKER_SHUTDOWN: Final = "WorkerShutdown"
#: Error class recorded on an attempt stopped because the worker lost the job's lease.
LEASE_LOST: Final = "LeaseLost"
#: The write that gives a job back unrun (an actor this worker lacks).
RELEASE: Final = "release"

#: Outstanding terminal writes per consumer slot before a consumer waits for its own.
WRITE_BACKLOG_PER_SLOT: Final = 4
#: Seconds before a failed terminal write is sent again; doubles up to WRITE_RETRY_MAX.
WRITE_RETRY_FIRST: Final = 0.5
WRITE_RETRY_MAX: Final = 10.0
#: ``asyncio.eager_task_factory`` (Python 3.12+): a task whose first step runs at creation.
_start_eagerly: Final[Callable[..., asyncio.Task[Any]] | None] = getattr(
    asyncio, "eager_task_factory", None
)

Completer = GroupCommit[Finish, Written]


class Dispatcher:
    """Runs jobs for the consumer loops of one worker."""

    def __init__(
        self,
        state: WorkerState,
        scopes: ActorScopes,
        *,
        completer: Completer,
        marks: StartMarks,
        gate: StartGate,
        tracing: Tracing | None = None,
    ) -> None:
        self.state = state
        #: None: no spans at all (TASKQ_OTEL_ENABLED=false); else asked per job, as an SDK
        #: may be configured after the worker started.
        self._tracing = tracing
        self._group = state.settings.worker_group
        self.scopes = scopes
        self.completer = completer
        self.marks = marks
        self.gate = gate
        self._backlog_limit = WRITE_BACKLOG_PER_SLOT * state.settings.max_concurrency
        self._retries: set[asyncio.Task[None]] = set()
        # Plain ``def`` actors run here, all max_concurrency of them at once (see
        # actor_threads: why not the loop's default pool, why daemon threads).
        # THREAD-scope instances are torn down in the thread that made them (sqlite3, ...).
        hooks: ThreadHooks | None = getattr(scopes, "thread", None)
        self._threads = ActorThreads(state.settings.max_concurrency, hooks=hooks)
        self.timers = AttemptTimers(state, self._threads)
        self._hold: Callable[[], Callable[[], None]] | None = getattr(state.clock, "hold", None)
        limiter = state.ports.rate_limiter
        # Startup refuses actors with limits when there is no limiter (require_rate_limiter).
        self.limits = (
            None
            if limiter is None
            else ActorLimits(
                limiter, holder=state.worker_id, lease=state.lease, rng=state.rng.uniform
            )
        )
        state.shutdown_event.on_set(self._stop_waiting)

    # -- the loop ------------------------------------------------------------------------

    async def run_consumer(self) -> None:
        """Dispatch jobs until the shutdown event; returns cleanly then."""
        state = self.state
        queue = state.local_queue
        while not state.shutdown_event.is_set():
            job = queue.get_nowait()
            if job is None:
                job = await queue.get()
                if job is None:
                    return  # closed: the shutdown is complete
            self._slot_taken()
            state.active.enter()
            try:
                write = await self._run(job)
            finally:
                state.active.leave()
            if write is not None and state.writes_in_flight > self._backlog_limit:
                await self._settle(write)  # the database is behind: wait for this one

    def _slot_taken(self) -> None:
        state = self.state
        if not state.slot_freed.is_set() and state.claim_room() >= state.claim_threshold:
            state.slot_freed.set()  # only a wake-up worth a claim (the producer's own rule)

    def _stop_waiting(self) -> None:
        """The shutdown is complete (or the worker isolated): stop waiting for running jobs.

        Their outcome is the shutdown's or the sweep's now; their tasks are
        cancelled, and their consumers return even if a task ignores that.
        """
        for active in self.state.active:
            task = active.task
            if task is not None and not task.done():
                active.stop_waiting = True
                task.cancel()
                if active.settled is not None and not active.settled.done():
                    active.settled.set_result(None)

    # -- one job -------------------------------------------------------------------------

    async def dispatch(self, job: ClaimedJob) -> None:
        """Run one claimed job to a written outcome (or a logged reason why not)."""
        self.state.active.enter()
        try:
            write = await self._run(job)
        finally:
            self.state.active.leave()
        if write is not None:
            await self._settle(write)

    async def _run(self, job: ClaimedJob) -> asyncio.Future[Written] | None:
        """Run ``job``; the future of its batched terminal write, if one was submitted."""
        state = self.state
        ref = state.registry.get(job.actor)
        if ref is None:
            await self._release_unknown(job)
            return None
        active = ActiveJob(job, ref)
        if self._tracing is not None:
            tracer = self._tracing.tracer()
            if tracer is not None:
                active.span = attempt_span.start(
                    tracer, job, worker_id=state.worker_id, group=self._group
                )
        active.gated = needs_gate(job, ref.retry)
        state.active.add(active)
        # Started by its claim, or to be marked by the gate before it runs: no lazy mark.
        self.marks.started(active, marked=job.started or active.gated)
        # A shutdown already cancelling covers jobs that start after it began.
        if state.shutdown_cancel == "cooperative":
            active.request_cancel("shutdown")
        elif state.shutdown_cancel == "forced":
            active.force_cancel("shutdown")
        try:
            ended = await self._execute(active)
        except BaseException:
            state.active.remove(job.id)
            self.marks.ended(active)
            if active.span is not None:
                attempt_span.end_unfinished(
                    active.span, attempt_span.INTERRUPTED, error_type=WORKER_SHUTDOWN
                )
            state.metrics.attempt_ended(job.actor, job.queue, attempt_span.INTERRUPTED, None)
            raise
        if ended is None:
            state.active.remove(job.id)
            self.marks.ended(active)
            ended_as = _unconcluded_outcome(active)
            if active.span is not None:
                _end_unconcluded(active, ended_as)
            if ended_as != attempt_span.NOT_STARTED:
                state.metrics.attempt_ended(job.actor, job.queue, ended_as, None)
            return None
        return await self._conclude(active, ended)

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
            job, RELEASE, self.state.store.release(job.lease, delay=UNKNOWN_ACTOR_RELEASE_DELAY)
        )

    async def _execute(self, active: ActiveJob) -> Outcome | None:
        """Run the actor: how the attempt ended, or None when it must not run (its gate's
        start mark did not find the lease held) or the worker stopped waiting for it."""
        job, ref = active.job, active.ref
        if job.unreadable is not None:
            return PayloadInvalid(job.unreadable)
        deadline = job.schedule_to_close
        if deadline is not None:
            # The claim's own time, on the database clock: its lease ends one lease later.
            claimed_at = job.lock_expires_at - self.state.lease
            if claimed_at >= deadline:
                return LateStart(deadline, claimed_at)  # not worth starting now
        try:
            payload = ref.load_payload(job.payload)
            # Built only for an actor that takes it (the usual actor does not).
            ctx = self._context(active, payload) if getattr(ref, "wants_context", True) else None
        except PayloadValidationError as exc:
            return PayloadInvalid(str(exc))
        except Exception as exc:
            # A model validator that raised something else: the same payload will again.
            return Raised.from_exception(exc, retryable=False)
        admitted = NO_LIMITS
        if self.limits is not None and declares_limits(ref):  # no await for other actors
            try:
                granted = await self.limits.acquire(ref, payload, job_id=job.id)
            except PayloadValidationError as exc:  # a key the payload cannot fill
                return PayloadInvalid(str(exc))
            if isinstance(granted, Denied):
                self.state.metrics.rate_limit_denied(job.actor, granted.reason)
                return Snoozed(granted.retry_after)  # not invoked, no attempt used
            admitted = granted
        try:
            if active.gated and not await self._through_gate(active):
                return None
            if active.cancel_reason == "request":
                # A user's cancel reached it before its actor was called (while its start
                # mark or its limits were under way): it is not started at all.
                return CancelledByRequest()
            return await self._invoke_in_task(active, payload, ctx)
        finally:
            if admitted.reservations and self.limits is not None:
                # Here, not in the task: a task cancelled before its first step never
                # runs its finally. Best-effort; the lease expiry frees what slips.
                await self.limits.release(admitted, job_id=job.id)

    async def _through_gate(self, active: ActiveJob) -> bool:
        """Mark a gated job started before it runs; False when it must not run.

        The mark must land first: only then does an empty ``started_at`` mean the
        job never ran. A lease found gone means the drain or the sweep gave the job
        to someone else; a mark that fails leaves it unstarted and owned by this
        worker until the heartbeat gives it back as an orphan.
        """
        state, job = self.state, active.job
        mark = self.gate.mark(job.lease)
        try:
            held = await until_stopped(
                state.clock,
                asyncio.shield(mark),
                state.shutdown_event,
                state.settings.heartbeat_command_timeout,
            )
        except (TaskQError, TimeoutError) as exc:
            events.emit(
                events.JOB_WRITE_FAILED, logging.ERROR, job_id=job.id, write="start", error=str(exc)
            )
            return False
        if not held:
            level = logging.INFO if state.shutdown_in_progress else logging.WARNING
            events.emit(
                events.JOB_LEASE_LOST,
                level,
                job_id=job.id,
                fencing_token=job.fencing_token,
                write="start",
            )
            return False
        # The shutdown gave it back unrun while the mark was under way.
        return not active.abandon_queued

    async def _invoke_in_task(
        self, active: ActiveJob, payload: Any, ctx: JobContext[Any] | None
    ) -> Outcome | None:
        job, ref = active.job, active.ref
        attempt_log.started(job)
        coro, name = self._invoke(active, payload, ctx), f"{JOB_TASK_PREFIX}{job.id}"
        # The attempt's span is current in the actor's task (None: a copy of this one's).
        context = None if active.span is None else attempt_span.task_context(active.span)
        if (
            _start_eagerly is not None
            and not active.forced
            and not self.state.shutdown_event.is_set()
        ):
            # Python 3.12+: the actor's first step runs now, in its own task; an actor that
            # never suspends is done here, with no loop turn, no future and no wake-up.
            task = _start_eagerly(asyncio.get_running_loop(), coro, name=name, context=context)
        else:
            task = asyncio.create_task(coro, name=name, context=context)
        active.task = task
        if task.done():  # only an eager task can be
            return _outcome_of(active, task)
        if self._hold is not None and not getattr(ref, "is_async", True):
            # A fake clock (tests): its time must not race ahead while the actor's
            # thread works, unseen by the loop.
            task.add_done_callback(partial(_call, self._hold()))
        if active.forced:  # forced before the task existed
            task.cancel()
        if self.state.shutdown_event.is_set():
            active.stop_waiting = True
            task.cancel()
            return None
        # Done when the task is, or when the worker stops waiting (see _stop_waiting):
        # one future, not a race of waiters per job.
        settled = active.settled = task.get_loop().create_future()
        task.add_done_callback(partial(_settle_once, settled))
        watcher = self.timers.arm(active, task)  # None unless the attempt has a bound
        try:
            await settled
        except BaseException:
            task.cancel()  # this consumer itself is being cancelled
            raise
        finally:
            if watcher is not None:
                watcher.cancel()
        if active.stop_waiting:
            return None
        if not task.done():
            if active.abandon_queued:
                # The heartbeat abandoned it (a cancel it ignored past both graces): the
                # outcome is written; its slot serves the next job.
                self.timers.leave(active, task)
                return None
            return self.timers.gave_up(active, task)  # its timeout's cleanup grace passed
        return _outcome_of(active, task)

    def _context(self, active: ActiveJob, payload: Any) -> JobContext[Any]:
        return JobContext.for_claimed(
            active.job,
            payload,
            worker_id=self.state.worker_id,
            cancel_event=active.cancel_event,
            span=active.span,
        )

    async def _invoke(self, active: ActiveJob, payload: Any, ctx: JobContext[Any] | None) -> Any:
        ref = active.ref
        try:
            if not getattr(ref, "dependencies", True):
                # Nothing to resolve or tear down.
                return await ref.run(payload, ctx, {}, executor=self._threads)
            async with self.scopes.actor_scope(ref) as deps:
                return await self._run_actor(active, payload, ctx, deps)
        except (Exception, asyncio.CancelledError, GeneratorExit):
            raise  # an error of the job, its cancellation, or its coroutine closed
        except BaseException as exc:
            raise ActorBaseException(exc) from exc

    async def _run_actor(
        self,
        active: ActiveJob,
        payload: Any,
        ctx: JobContext[Any] | None,
        deps: Mapping[str, object],
    ) -> Any:
        """Run the actor; record how it ended before its TRANSIENT teardown runs (a
        cancel during the teardown must not change the outcome)."""
        try:
            value = await active.ref.run(payload, ctx, deps, executor=self._threads)
        except asyncio.CancelledError:
            raise  # cancelled while running: no outcome of its own
        except BaseException as exc:
            # SystemExit (a library's sys.exit(), argparse's error()), KeyboardInterrupt
            # or another BaseException from the actor's code is an error of this job. Left
            # as is, asyncio re-raises the first two out of the event loop: the worker
            # would end with every job it holds, and the job do it again when reclaimed.
            # (SIGINT and SIGTERM reach the worker's shutdown, never a job, while
            # handle_signals is on, as in `taskq worker`.)
            error = exc if isinstance(exc, Exception) else ActorBaseException(exc)
            active.actor_ended = (None, error, active.cancel_reason)
            if error is exc:
                raise
            raise error from exc
        active.actor_ended = (value, None, active.cancel_reason)
        return value

    async def _conclude(
        self, active: ActiveJob, outcome: Outcome
    ) -> asyncio.Future[Written] | None:
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
            and consumer_skips_mark_cancelled(state.cancel_controller.phase_of(job.id))
        ):
            self.marks.ended(active)
            return None  # the abandonment owns the write
        active.finishing = True
        # The job stays with the start marks until its write is answered: its row is
        # still running until then, and a drain must not take it for an unstarted one.
        if isinstance(decision, Complete | Fail | Cancel):
            state.writes_in_flight += 1
            finish = _finish_of(active, decision, started_ago)
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
        self.state.writing.add(active.job.id)
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
        state.writes_in_flight -= 1
        state.writing.discard(job.id)
        if done.cancelled() or done.exception() is not None:
            state.unwritten.add(job.lease)  # it ran; its lease and the sweep decide what follows
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
            state.drain_failures += 1

    async def _retry(
        self, active: ActiveJob, finish: Finish, what: str, retries: int, delay: float
    ) -> None:
        try:
            await self.state.clock.sleep(delay)
        except asyncio.CancelledError:
            # The worker stopped first: the job is left to its lease and the sweep.
            self.marks.ended(active)
            self.state.writes_in_flight -= 1
            self.state.writing.discard(active.job.id)
            self.state.unwritten.add(active.job.lease)
            raise
        self._submit(active, finish, what, retries)

    async def close(self) -> None:
        """Stop pending write retries (their jobs are left to their leases) and let the
        actor threads go (one still running a job the shutdown gave up on is a daemon:
        it does not hold the process)."""
        for task in list(self._retries):
            task.cancel()
        await asyncio.gather(*self._retries, return_exceptions=True)
        self.timers.close()
        self._threads.shutdown(wait=False, cancel_futures=True)
        # Idle threads stop now, tearing down their THREAD-scope instances: wait for
        # that, so the scopes' close sees it done (a thread still in a job is not waited).
        idle = self._threads.idle_stopped()
        if idle:
            release = self._hold() if self._hold is not None else None
            try:
                await asyncio.gather(*(asyncio.wrap_future(f) for f in idle))
            finally:
                if release is not None:
                    release()

    @staticmethod
    async def _settle(write: asyncio.Future[Written]) -> None:
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
        state = self.state
        state.writing.add(job.id)
        try:
            # Bounded, so a network that stopped answering cannot hold the slot (and a
            # stopping worker) for the kernel's TCP timeouts; past the shutdown, given up
            # on sooner still. What did not land is left to the lease.
            task = asyncio.ensure_future(
                bounded_store_call(state.clock, state.settings.heartbeat_command_timeout, write)
            )
            kept(task)
            await until_stopped(
                state.clock,
                asyncio.shield(task),
                state.shutdown_event,
                state.settings.heartbeat_command_timeout,
            )
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
                state.unwritten.add(job.lease)  # it ran: not the heartbeat's orphan to give back
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
            state.writing.discard(job.id)
        return True


def _outcome_of(active: ActiveJob, task: asyncio.Task[Any]) -> Outcome:
    """How the attempt ended, given why (and whether) it was asked to stop."""
    reason = active.cancel_reason
    if active.actor_ended is not None:
        # The actor had ended: a cancel during its teardown cannot change that.
        if task.done() and not task.cancelled():
            task.exception()  # retrieved here, or asyncio logs it as never retrieved
        value, exc, reason = active.actor_ended
    elif task.cancelled():
        if reason is None:
            # Nobody asked: the actor's code raised CancelledError itself (a library that
            # leaks one). An error of the attempt, retried as its policy says, not a cancel.
            return Raised(
                "CancelledError", "the actor raised CancelledError; no cancel was requested"
            )
        if reason == "request":
            return CancelledByRequest()
        if reason in TIMED_OUT_REASONS:
            return timed_out(active)
        return _interrupted(active)
    else:
        exc = task.exception()
        value = task.result() if exc is None else None
    if exc is None:
        if reason is not None and active.cancel_event.observed:
            # A cooperative early return: the actor saw the request and stopped.
            if reason in TIMED_OUT_REASONS:
                return timed_out(active)
            return CancelledByRequest() if reason == "request" else _interrupted(active)
        try:
            # Finished without looking at the request: the work is done.
            return Succeeded(active.ref.dump_result(value))
        except Exception as dump_error:
            # The same result will not serialise next time either.
            return Raised.from_exception(dump_error, retryable=False)
    if reason == "request":
        return CancelledByRequest()
    if reason is not None and active.cancel_event.observed:
        if reason in TIMED_OUT_REASONS:
            return timed_out(active, raised=exc)  # it raised to stop at its bound
        return _interrupted(active)  # it raised to stop, as the worker asked
    if isinstance(exc, Snooze | RetryAfter):
        return outcome_from_exception(exc)
    if isinstance(exc, ActorBaseException):
        return Raised.from_exception(exc.original)
    retryable = not isinstance(exc, PayloadValidationError)
    return Raised.from_exception(exc, retryable=retryable)


def _unconcluded_outcome(active: ActiveJob) -> str:
    """How an attempt that ended with no outcome of the consumer's own ended: abandoned
    (its abandonment owns the write), not started (its start mark lost the lease), or
    interrupted (the worker stopped waiting for it)."""
    if active.abandon_queued:
        return attempt_span.ABANDONED
    if active.task is None and not active.stop_waiting:
        return attempt_span.NOT_STARTED
    return attempt_span.INTERRUPTED


def _end_unconcluded(active: ActiveJob, ended_as: str) -> None:
    """End the span of an attempt that ended with no outcome of the consumer's own."""
    assert active.span is not None
    if ended_as == attempt_span.ABANDONED:
        attempt_span.end_unfinished(active.span, ended_as, error_type="Abandoned")
    elif ended_as == attempt_span.NOT_STARTED:
        attempt_span.end_unfinished(active.span, ended_as)
    else:
        attempt_span.end_unfinished(active.span, ended_as, error_type=WORKER_SHUTDOWN)


def _interrupted(active: ActiveJob) -> Interrupted:
    """The worker's own reason for stopping the attempt, said as it happened."""
    if active.cancel_reason == "lease_lost":
        return Interrupted(
            LEASE_LOST, "the worker lost the job's lease (isolated, or the lease was reclaimed)"
        )
    how = (
        "still running after the cancellation grace, its task was cancelled"
        if active.forced
        else "the actor stopped when its cancel_event was set"
    )
    return Interrupted(WORKER_SHUTDOWN, f"interrupted by the worker's shutdown: {how}")


class ActorBaseException(Exception):
    """Carries a BaseException the actor raised (SystemExit, ...) out of its task as an
    ordinary error of the job."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"{type(original).__name__}: {original!r}")
        self.original = original


def _call(release: Callable[[], None], _: object) -> None:
    release()


def _settle_once(settled: asyncio.Future[None], _: object) -> None:
    if not settled.done():
        settled.set_result(None)


def _finish_of(
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
    "UNKNOWN_ACTOR_RELEASE_DELAY",
    "WORKER_SHUTDOWN",
    "Completer",
    "Dispatcher",
]
