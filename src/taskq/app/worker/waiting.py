"""Waiting on the Clock port: every timed wait of the worker goes through here.

Timeouts race the awaited work against ``clock.sleep`` instead of using
``asyncio.wait_for``, so a fake clock drives every one of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from taskq.ports.clock import Clock

T = TypeVar("T")


async def _cancel_all(tasks: Sequence[asyncio.Future[Any]]) -> None:
    for task in tasks:
        task.cancel()
    # Let the cancellations land so no task outlives the wait that made it.
    await asyncio.gather(*tasks, return_exceptions=True)


async def wait_event(clock: Clock, seconds: float | None, *events: asyncio.Event) -> bool:
    """Wait until any of ``events`` is set or ``seconds`` pass (None: no timeout).

    Returns True when an event is set (checked first, so a set event never waits).
    """
    if any(e.is_set() for e in events):
        return True
    tasks: list[asyncio.Future[Any]] = [asyncio.create_task(e.wait()) for e in events]
    if seconds is not None:
        tasks.append(asyncio.create_task(clock.sleep(max(seconds, 0.0))))
    if not tasks:
        raise ValueError("wait_event needs an event or a timeout")
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await _cancel_all(tasks)
    return any(e.is_set() for e in events)


async def with_timeout(clock: Clock, seconds: float, work: Awaitable[T]) -> T:
    """``await work``, raising ``TimeoutError`` once ``seconds`` pass on ``clock``.

    The work is cancelled on timeout and when the caller is cancelled.
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
        await _cancel_all([task])
        raise TimeoutError(f"gave up after {seconds:g}s")
    return task.result()


async def until_done_or(task: asyncio.Future[T], event: asyncio.Event) -> bool:
    """Wait until ``task`` is done or ``event`` is set; True when the task is done.

    The task is never cancelled here: the caller decides what to do with it.
    """
    if task.done():
        return True
    waiter: asyncio.Future[Any] = asyncio.create_task(event.wait())
    try:
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    return task.done()
