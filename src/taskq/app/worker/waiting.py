"""Waiting on the Clock port: every timed wait of the worker goes through here.

Timeouts race the awaited work against ``clock.sleep`` instead of using
``asyncio.wait_for``, so a fake clock drives every one of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from taskq.domain.errors import StoreTimeout
from taskq.ports.clock import Clock

T = TypeVar("T")


async def _cancel_all(tasks: Sequence[asyncio.Future[Any]]) -> None:
    for task in tasks:
        task.cancel()
    # Let the cancellations land so no task outlives the wait that made it.
    await asyncio.gather(*tasks, return_exceptions=True)


class LatchEvent(asyncio.Event):
    """An ``asyncio.Event`` that also offers :meth:`future`, done once it is set.

    Racing a future against it then needs no ``event.wait()`` task: a hot
    path (every job races its task against the shutdown) can wait on two
    futures with plain done-callbacks.
    """

    _latch: asyncio.Future[None] | None = None
    _listeners: tuple[Callable[[], None], ...] = ()

    def on_set(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (synchronously) each time the event goes from clear to set."""
        self._listeners = (*self._listeners, listener)

    def future(self) -> asyncio.Future[None]:
        """A future done when the event is set (already done if it is set now)."""
        latch = self._latch
        if latch is None or (latch.done() and not self.is_set()):
            latch = asyncio.get_running_loop().create_future()
            if self.is_set():
                latch.set_result(None)
            self._latch = latch
        return latch

    def set(self) -> None:
        was_set = super().is_set()
        super().set()
        latch = self._latch
        if latch is not None and not latch.done():
            latch.set_result(None)
        if not was_set:
            for listener in self._listeners:
                listener()


async def first_done(*futures: asyncio.Future[Any]) -> None:
    """Wait until any of ``futures`` is done, without tasks and without cancelling any.

    Cheaper than ``asyncio.wait``: one future and a done-callback per input.
    """
    for future in futures:
        if future.done():
            return
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake(_: asyncio.Future[Any]) -> None:
        if not waiter.done():
            waiter.set_result(None)

    for future in futures:
        future.add_done_callback(wake)
    try:
        await waiter
    finally:
        for future in futures:
            future.remove_done_callback(wake)


async def wait_event(clock: Clock, seconds: float | None, *events: asyncio.Event) -> bool:
    """Wait until any of ``events`` is set or ``seconds`` pass (None: no timeout).

    Returns True when an event is set (checked first, so a set event never waits).
    """
    if any(e.is_set() for e in events):
        return True
    # A latch is raced through its future; only plain events need a wait() task.
    tasks: list[asyncio.Future[Any]] = [
        asyncio.create_task(e.wait()) for e in events if not isinstance(e, LatchEvent)
    ]
    if seconds is not None:
        tasks.append(asyncio.create_task(clock.sleep(max(seconds, 0.0))))
    futures = tasks + [e.future() for e in events if isinstance(e, LatchEvent)]
    if not futures:
        raise ValueError("wait_event needs an event or a timeout")
    try:
        await first_done(*futures)
    finally:
        # Cancelled, not awaited: waiting for the timer's cancellation to land would
        # cost the caller another turn of a busy loop (the producer waits here once
        # per claim). The cancelled tasks finish on their own in the next turn.
        for task in tasks:
            task.cancel()
    return any(e.is_set() for e in events)


async def with_timeout(
    clock: Clock, seconds: float, work: Awaitable[T], *, abandon: bool = False
) -> T:
    """``await work``, raising ``TimeoutError`` once ``seconds`` pass on ``clock``.

    The work is cancelled on timeout and when the caller is cancelled. With
    ``abandon`` a timed-out work is cancelled but not waited for: on a silently
    dropped connection the cancellation itself can hang (a driver's cancel
    request and connection release wait on the same dead socket).
    """
    task: asyncio.Future[T] = asyncio.ensure_future(work)
    timer: asyncio.Future[Any] = asyncio.create_task(clock.sleep(seconds))
    try:
        await asyncio.wait([task, timer], return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        await _cancel_all([task])
        raise
    finally:
        timer.cancel()
    if not task.done():
        if abandon:
            _abandon(task)
        else:
            await _cancel_all([task])
        raise TimeoutError(f"gave up after {seconds:g}s")
    return task.result()


#: The bound of a job's outcome writes (a result, a retry's reschedule): its lease. Past it
#: the job is another worker's to run, so waiting longer serves nothing; short of it a
#: slow but live server (a large result, a loaded machine) is waited for rather than
#: the job run again. A dead network is found sooner by the heartbeat's own bound
#: (TASKQ_HEARTBEAT_COMMAND_TIMEOUT), which isolates the worker.
JOB_WRITE_BOUND_SETTING = "TASKQ_LOCK_LEASE"


async def bounded_store_call(
    clock: Clock,
    seconds: float,
    work: Awaitable[T],
    *,
    setting: str = "TASKQ_HEARTBEAT_COMMAND_TIMEOUT",
) -> T:
    """``await work``, a store call the worker makes, given up after ``seconds``.

    The worker's store has no per-call bound of its own (a caller's pool keeps its
    settings), so every call the worker makes goes through here, bounded by the
    ``setting`` that ``seconds`` comes from: on a network that stopped answering, a
    write or a wait for a pool connection would otherwise hang for the kernel's TCP
    timeouts. Past the bound the call is abandoned (its cancellation can hang as
    long) and fails as a ``StoreTimeout``, a store failure like any other: retried
    where a failed write is retried.
    """
    try:
        return await with_timeout(clock, seconds, work, abandon=True)
    except TimeoutError as exc:
        raise StoreTimeout(
            f"the store did not answer within {setting}={seconds:g}s, "
            "so the call was given up (a database or network that stopped answering, or "
            "no free connection); a write may or may not have been applied",
            waited_for="the store's answer",
            timeout=seconds,
        ) from exc


async def until_stopped(clock: Clock, work: Awaitable[T], stop: LatchEvent, grace: float) -> T:
    """``await work``; once ``stop`` is set, ``grace`` seconds more, then ``TimeoutError``.

    The work is then abandoned (cancelled, not waited for): on a dead network
    its cancellation can hang as long as the work itself.
    """
    task: asyncio.Future[T] = asyncio.ensure_future(work)
    try:
        if not task.done():
            await first_done(task, stop.future())
        if not task.done():
            await with_timeout(clock, grace, asyncio.shield(task))
    except TimeoutError:
        _abandon(task)
        raise TimeoutError(f"abandoned {grace:g}s after the stop") from None
    except BaseException:
        _abandon(task)
        raise
    return task.result()


#: Abandoned works still running: referenced so they are not collected mid-flight.
_abandoned: set[asyncio.Future[Any]] = set()


def _abandon(task: asyncio.Future[Any]) -> None:
    task.cancel()
    kept(task)


def kept(task: asyncio.Future[Any]) -> None:
    """Keep ``task`` referenced until done, its failure retrieved: a work that may be
    given up on (its failure is reported by whoever gave up) must not be collected
    mid-flight nor logged as "exception never retrieved"."""
    _abandoned.add(task)

    def forget(done: asyncio.Future[Any]) -> None:
        _abandoned.discard(done)
        if not done.cancelled():
            done.exception()

    task.add_done_callback(forget)
