"""One wake-up in flight per queue for a store's own enqueues.

Postgres serialises the commits of every transaction that sent a NOTIFY in a
database: from pre-commit until its commit record is flushed, such a
transaction holds a database-wide lock. A wake-up in every single enqueue
therefore caps concurrent enqueuers at one commit flush at a time (measured
here: 5,000 notifying inserts/s from 16 connections, where plain inserts
reached 15,000). The gate keeps at most one wake-up per queue in flight from
this store's autocommit enqueues:

- an enqueue that finds none in flight carries the wake-up in its own
  statement (an idle worker is woken as before, at that commit);
- an enqueue that finds one in flight writes without it, and once its commit
  has returned it owes the queue a wake-up: the next wake-up *started* after
  that is one the workers receive after the job is visible, so it is sent as
  soon as the one in flight has finished (``wake_queue``, its own commit).

So concurrent enqueues share wake-ups (the busier the server, the more
share one), a job's wake-up comes at most one notifying commit after its
own, and no committed job is left without a wake-up sent after its commit.
Enqueues in a caller's transaction are not gated: only the caller's commit
makes their jobs visible, so their statement carries the wake-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger("taskq.notify")


@dataclass(slots=True)
class _QueueWake:
    in_flight: bool = False
    owed: bool = False


class WakeGate:
    """Decides which enqueue statements carry a wake-up; sends the owed ones.

    ``send(queue)`` sends one wake-up in its own transaction. Single-threaded
    (one event loop), so the bookkeeping needs no lock.
    """

    def __init__(self, send: Callable[[str], Awaitable[None]]) -> None:
        self._send = send
        self._queues: dict[str, _QueueWake] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def carries(self, queue: str) -> bool:
        """Before a statement: whether it carries the wake-up (then call :meth:`done`)."""
        state = self._queues.get(queue)
        if state is None:
            state = self._queues[queue] = _QueueWake()
        if state.in_flight:
            return False
        state.in_flight = True
        return True

    def done(self, queue: str, *, carried: bool, wrote: bool) -> None:
        """After a statement returned or failed.

        ``wrote``: it may have committed jobs (a failed statement may have
        committed before its connection broke: a spare wake-up costs little).
        """
        state = self._queues[queue]
        if carried:
            state.in_flight = False
        elif wrote:
            state.owed = True
        self._send_owed(queue, state)

    def _send_owed(self, queue: str, state: _QueueWake) -> None:
        if not state.owed or state.in_flight:
            return
        # Started after every owing commit returned: it is delivered after all of them.
        state.owed = False
        state.in_flight = True
        task = asyncio.get_running_loop().create_task(self._send_one(queue, state))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_one(self, queue: str, state: _QueueWake) -> None:
        try:
            await self._send(queue)
        except asyncio.CancelledError:
            state.in_flight = False
            raise
        except Exception as exc:
            # The workers' fallback poll finds the jobs; nothing is lost but latency.
            log.warning(
                "wake-up for queue %r not sent (%s: %s); workers find its jobs at their next poll",
                queue,
                type(exc).__name__,
                exc,
            )
        state.in_flight = False
        self._send_owed(queue, state)

    async def aclose(self) -> None:
        """Wait for the wake-ups in flight (before the pool they run on closes)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


__all__ = ["WakeGate"]
