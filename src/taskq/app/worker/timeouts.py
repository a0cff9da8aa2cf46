"""Attempt timeouts and running deadlines: armed when an attempt starts, carried out here.

The rule is :mod:`taskq.domain.timeouts`: an attempt is bounded by its job's
``attempt_timeout`` (else its actor's ``timeout``) and by the job's
``schedule_to_close``; a job with neither gets nothing armed (one attribute
test per job). For a bounded attempt the consumer arms one watcher task, which
sleeps on the worker's clock and, while the attempt still runs, walks the
cancel protocol::

    bound reached       cancel_event set, reason "timeout"/"deadline"    job-timed-out
    + cooperative       async actor: task.cancel()                       job-timeout-forced
                        sync actor: nothing (its thread cannot be stopped)
    + cleanup           the consumer stops waiting and writes the         job-timeout-abandoned
                        outcome; the task (or thread) is left to end

Another stop that came first (a user's cancel, the worker's shutdown, a lost
lease) keeps its own meaning: the watcher then does nothing. However the
attempt ends after the expiry, unless it returned without looking at its
``cancel_event``, its outcome is an error of class ``AttemptTimeout`` (or
``DeadlineExceeded``), decided by the job's retry policy like any error.

A sync actor's thread is never waited for past the cleanup grace. The thread
keeps running, and its TRANSIENT dependencies stay open until it returns
(they are torn down then); it is written off in the actor threads, so the
worker can start another in its place (:meth:`ActorThreads.write_off`).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from taskq.app.worker import events
from taskq.app.worker.actor_threads import ActorThreads
from taskq.app.worker.attempt_log import job_fields
from taskq.app.worker.state import ActiveJob
from taskq.app.worker.task_views import WorkerBasics
from taskq.domain.cancel import GracePeriods
from taskq.domain.outcomes import Raised, exception_text
from taskq.domain.timeouts import AttemptBound, attempt_bound
from taskq.domain.tracebacks import traceback_text

#: Cancel reasons a timeout sets (``CancelReason``).
TIMED_OUT_REASONS = frozenset({"timeout", "deadline"})


class AttemptTimers:
    """The watchers of one worker's bounded attempts, and the tasks it gave up on."""

    def __init__(self, state: WorkerBasics, threads: ActorThreads) -> None:
        self.state = state
        self._threads = threads
        settings = state.settings
        self._graces = GracePeriods(
            cancellation_grace_period=settings.cancellation_grace_period,
            cleanup_grace_period=settings.cleanup_grace_period,
        )
        self._watchers: set[asyncio.Task[None]] = set()
        #: Job tasks the worker stopped waiting for (they may never end).
        self._left: set[asyncio.Task[Any]] = set()

    def __repr__(self) -> str:
        return f"<AttemptTimers watching={len(self._watchers)} left={len(self._left)}>"

    def arm(self, active: ActiveJob, task: asyncio.Task[Any]) -> asyncio.Task[None] | None:
        """Watch ``task``, the attempt of ``active``, if it has a bound; the watcher (the
        consumer cancels it once the attempt has ended), or None."""
        job = active.job
        timeout: timedelta | None = job.attempt_timeout
        if timeout is None:
            timeout = getattr(active.ref, "timeout", None)
            if timeout is None and job.schedule_to_close is None:
                return None  # the usual job: no bound, nothing armed
        bound = attempt_bound(
            timeout=timeout,
            deadline=job.schedule_to_close,
            now=self.state.clock.now(),
            graces=self._graces,
        )
        assert bound is not None
        watcher = asyncio.create_task(
            self._watch(active, task, bound), name=f"taskq-job-{job.id}-timeout"
        )
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        return watcher

    async def _watch(self, active: ActiveJob, task: asyncio.Task[Any], bound: AttemptBound) -> None:
        clock = self.state.clock
        await clock.sleep(bound.after)
        if task.done() or active.cancel_reason is not None:
            return  # it ended, or another stop came first and keeps its meaning
        active.expired = bound
        active.request_cancel(bound.kind)
        events.emit(
            events.JOB_TIMED_OUT,
            logging.WARNING,
            **job_fields(active),
            reached=bound.reached(),
            then=f"cancel_event set; stopped after {bound.cooperative:g} s if still running",
        )
        await clock.sleep(bound.cooperative)
        if not _still_ours(active, task, bound):
            return
        sync = not getattr(active.ref, "is_async", True)
        if not sync:
            active.force_cancel(bound.kind)
        events.emit(
            events.JOB_TIMEOUT_FORCED,
            logging.WARNING,
            **job_fields(active),
            action="a sync actor's thread cannot be stopped: waited for"
            if sync
            else "task cancelled",
            then=f"given up on after {bound.cleanup:g} s if still running",
        )
        await clock.sleep(bound.cleanup)
        if not _still_ours(active, task, bound) or active.stop_waiting:
            return
        settled = active.settled
        if settled is not None and not settled.done():
            settled.set_result(None)  # the consumer concludes: see gave_up

    def leave(self, active: ActiveJob, task: asyncio.Task[Any]) -> bool:
        """Stop waiting for ``task``, the still running attempt of ``active``: it is left to
        end on its own, its outcome discarded, and a sync actor's thread is written off so
        another can take its place. Whether a thread was written off."""
        sync = not getattr(active.ref, "is_async", True)
        written_off = sync and self._threads.write_off()
        self._left.add(task)
        task.add_done_callback(lambda done: self._ended(done, written_off))
        return written_off

    def gave_up(self, active: ActiveJob, task: asyncio.Task[Any]) -> Raised:
        """The outcome of an attempt the watcher gave up on (its ``task`` still runs)."""
        sync = not getattr(active.ref, "is_async", True)
        written_off = self.leave(active, task)
        events.emit(
            events.JOB_TIMEOUT_ABANDONED,
            logging.ERROR,
            **job_fields(active),
            reason="still running after the cleanup grace; the worker stopped waiting for it",
            thread="left running (a daemon); another thread may take its place"
            if written_off
            else ("left running (a daemon)" if sync else None),
        )
        return timed_out(active, running=True)

    def _ended(self, task: asyncio.Task[Any], written_off: bool) -> None:
        """A task the worker gave up on ended after all: its outcome is discarded."""
        self._left.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved, or asyncio logs it as never retrieved
        if written_off:
            self._threads.written_off_returned()

    def close(self) -> None:
        """Cancel the watchers and, once more, the tasks given up on (a task that ignores
        it does not hold the worker: it is not waited for)."""
        for task in (*self._watchers, *self._left):
            task.cancel()


def _still_ours(active: ActiveJob, task: asyncio.Task[Any], bound: AttemptBound) -> bool:
    """The attempt still runs and its stop is still this bound's (a user's cancel can take
    it over while it is only told: see ``ActiveJob.request_cancel``)."""
    return not task.done() and active.cancel_reason == bound.kind


def timed_out(
    active: ActiveJob, *, raised: BaseException | None = None, running: bool = False
) -> Raised:
    """The outcome of an attempt stopped at its bound (``active.expired``): how it ended,
    as the error of class ``AttemptTimeout`` or ``DeadlineExceeded``."""
    bound = active.expired
    assert bound is not None, "only an attempt whose bound was reached timed out"
    if running:
        how = (
            f"still running {bound.cooperative + bound.cleanup:g} s after its cancel_event "
            "was set; the worker stopped waiting for it"
        )
    elif active.forced:
        how = (
            f"still running {bound.cooperative:g} s after its cancel_event was set; "
            "its task was cancelled"
        )
    else:
        how = "the actor stopped when its cancel_event was set"
    message = f"the attempt ran past {bound.reached()}: {how}"
    trace = None
    if raised is not None:
        message += f" (raising {type(raised).__name__}: {exception_text(raised)})"
        trace = None if raised.__traceback__ is None else traceback_text(raised)
    return Raised(bound.error_class, message, retryable=True, traceback=trace)


__all__ = ["TIMED_OUT_REASONS", "AttemptTimers", "timed_out"]
