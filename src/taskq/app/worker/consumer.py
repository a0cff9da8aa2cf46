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
7. outcome (``attempt_outcome``) → :func:`taskq.domain.retry.decide` → finish,
   reschedule or interrupt (``outcome_writes``), shielded from cancellation;
   ``LeaseLost`` is logged, never retried.
   Terminal writes are batched across consumers (group commit) and the
   consumer takes its next job without waiting for its write to land
   (unless too many writes are outstanding): the write then holds the
   lease, the slot is free for the next job;
8. TRANSIENT scope teardown (the scope's ``async with`` around the invocation).

How an attempt that was asked to stop ends (``attempt_outcome``; ``ctx.cancel_event``
records whether the actor saw the request: read ``ctx.cancelled`` or awaited it):

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
import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final

from taskq.app.context import JobContext
from taskq.app.observability.tracing import Tracing
from taskq.app.worker import attempt_log, attempt_span, events
from taskq.app.worker.actor_threads import ActorThreads, ThreadHooks
from taskq.app.worker.attempt_outcome import (
    WORKER_SHUTDOWN,
    ActorBaseException,
    end_unconcluded,
    outcome_of,
    unconcluded_outcome,
)
from taskq.app.worker.exit_guard import JOB_TASK_PREFIX
from taskq.app.worker.limits import NO_LIMITS, ActorLimits, Denied, declares_limits
from taskq.app.worker.outcome_writes import Completer, OutcomeWrites
from taskq.app.worker.protocols import ActorScopes
from taskq.app.worker.refused_writes import Written
from taskq.app.worker.start_gate import StartGate, needs_gate
from taskq.app.worker.start_marks import StartMarks
from taskq.app.worker.state import ActiveJob
from taskq.app.worker.task_views import ConsumerView
from taskq.app.worker.timeouts import AttemptTimers
from taskq.domain.errors import PayloadValidationError, TaskQError
from taskq.domain.job import ClaimedJob
from taskq.domain.outcomes import (
    CancelledByRequest,
    LateStart,
    Outcome,
    PayloadInvalid,
    Raised,
    Snoozed,
)

#: Outstanding terminal writes per consumer slot before a consumer waits for its own.
WRITE_BACKLOG_PER_SLOT: Final = 4
#: ``asyncio.eager_task_factory`` (Python 3.12+): a task whose first step runs at creation.
_start_eagerly: Final[Callable[..., asyncio.Task[Any]] | None] = getattr(
    asyncio, "eager_task_factory", None
)


class Dispatcher:
    """Runs jobs for the consumer loops of one worker."""

    def __init__(
        self,
        state: ConsumerView,
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
        self.writes = OutcomeWrites(state, completer=completer, marks=marks)
        self._bounds = state.write_bounds
        self._stopping = state.stopping
        self._backlog_limit = WRITE_BACKLOG_PER_SLOT * state.settings.max_concurrency
        # Plain ``def`` actors run here, all max_concurrency of them at once (see
        # actor_threads: why not the loop's default pool, why daemon threads).
        # THREAD-scope instances are torn down in the thread that made them (sqlite3, ...).
        hooks: ThreadHooks | None = getattr(scopes, "thread", None)
        self._threads = ActorThreads(state.settings.max_concurrency, hooks=hooks)
        self.timers = AttemptTimers(state, self._threads)
        self._hold: Callable[[], Callable[[], None]] | None = getattr(state.clock, "hold", None)
        limiter = state.rate_limiter
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
        queue, ledger = state.local_queue, state.ledger
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
            if write is not None and ledger.writes_in_flight > self._backlog_limit:
                await OutcomeWrites.settle(write)  # the database is behind: wait for this one

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
            await OutcomeWrites.settle(write)

    async def _run(self, job: ClaimedJob) -> asyncio.Future[Written] | None:
        """Run ``job``; the future of its batched terminal write, if one was submitted."""
        state = self.state
        ref = state.registry.get(job.actor)
        if ref is None:
            await self.writes.release_unknown(job)
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
        shutdown_cancel = self._stopping.cancel
        if shutdown_cancel == "cooperative":
            active.request_cancel("shutdown")
        elif shutdown_cancel == "forced":
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
            ended_as = unconcluded_outcome(active)
            if active.span is not None:
                end_unconcluded(active, ended_as)
            if ended_as != attempt_span.NOT_STARTED:
                state.metrics.attempt_ended(job.actor, job.queue, ended_as, None)
            return None
        return await self.writes.conclude(active, ended)

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
        try:
            held = await self._bounds.until_stopped(self.gate.mark(job.lease))
        except (TaskQError, TimeoutError) as exc:
            events.emit(
                events.JOB_WRITE_FAILED, logging.ERROR, job_id=job.id, write="start", error=str(exc)
            )
            return False
        if not held:
            level = logging.INFO if state.stopping.in_progress else logging.WARNING
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
            return outcome_of(active, task)
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
        return outcome_of(active, task)

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

    async def close(self) -> None:
        """Stop pending write retries (their jobs are left to their leases) and let the
        actor threads go (one still running a job the shutdown gave up on is a daemon:
        it does not hold the process)."""
        await self.writes.close()
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


def _call(release: Callable[[], None], _: object) -> None:
    release()


def _settle_once(settled: asyncio.Future[None], _: object) -> None:
    if not settled.done():
        settled.set_result(None)


__all__ = ["WRITE_BACKLOG_PER_SLOT", "Dispatcher"]
