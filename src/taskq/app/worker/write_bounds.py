"""How long a running worker waits for a write of its own: one helper for every writer.

Two bounds, each named by the setting it comes from (see ``waiting``):

- a job's own outcome (a result, a failure, a retry's reschedule, an
  interruption) by its lease, ``TASKQ_LOCK_LEASE``: past it the job is another
  worker's to run, and short of it a slow but live server is waited for rather
  than the job run again;
- everything else the worker writes for itself (heartbeats, start marks, a
  release, the marks the start gate waits for) by
  ``TASKQ_HEARTBEAT_COMMAND_TIMEOUT``: small writes, written again or left to
  the lease when given up.

A consumer waiting for a write also stops waiting ``TASKQ_HEARTBEAT_COMMAND_TIMEOUT``
after the shutdown completes (:meth:`WriteBounds.until_stopped`): the write goes
on, bounded as above, but the slot does not wait for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

from taskq.app.worker.waiting import (
    JOB_WRITE_BOUND_SETTING,
    LatchEvent,
    bounded_store_call,
    kept,
    until_stopped,
)
from taskq.ports.clock import Clock

T = TypeVar("T")


class WriteBounds:
    """The bounds of one worker's writes (its clock, lease, command timeout and stop)."""

    __slots__ = ("_clock", "_command", "_lease", "_stop")

    def __init__(self, clock: Clock, *, lease: float, command_timeout: float, stop: LatchEvent):
        self._clock = clock
        self._lease = lease
        self._command = command_timeout
        self._stop = stop

    def __repr__(self) -> str:
        return f"<WriteBounds job={self._lease:g}s command={self._command:g}s>"

    def job(self, work: Awaitable[T]) -> Coroutine[Any, Any, T]:
        """``work``, a write of a job's outcome, given up after the job's lease."""
        return bounded_store_call(self._clock, self._lease, work, setting=JOB_WRITE_BOUND_SETTING)

    def command(self, work: Awaitable[T]) -> Coroutine[Any, Any, T]:
        """``work``, any other write of the worker's, given up after the command timeout."""
        return bounded_store_call(self._clock, self._command, work)

    # Plain functions returning the coroutine: no frame of their own on a job's path.

    def until_stopped(self, work: asyncio.Future[T]) -> Coroutine[Any, Any, T]:
        """Wait for ``work`` (shielded: it goes on whatever happens to the waiter) until
        the command timeout after the stop; ``TimeoutError`` then."""
        return until_stopped(self._clock, asyncio.shield(work), self._stop, self._command)

    def job_write(self, work: Awaitable[T]) -> Coroutine[Any, Any, T]:
        """``work``, a job's outcome, bounded by its lease and waited for until the stop
        (it starts now; await the result)."""
        task = asyncio.ensure_future(self.job(work))
        kept(task)  # its failure is the waiter's to report, or nobody's once abandoned
        return self.until_stopped(task)


__all__ = ["WriteBounds"]
