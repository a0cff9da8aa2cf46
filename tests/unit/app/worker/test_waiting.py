"""The task-free waits of the hot path: latch events, first_done, wait_event."""

from __future__ import annotations

import asyncio

from taskq.adapters.memory import FakeClock
from taskq.app.worker.waiting import LatchEvent, first_done, wait_event


async def test_latch_future_follows_set_and_clear() -> None:
    """A latch's future is done once set, and a fresh pending one is handed out after clear."""
    latch = LatchEvent()
    before = latch.future()
    assert not before.done()
    latch.set()
    assert before.done()
    assert latch.future().done()
    latch.clear()
    after = latch.future()
    assert not after.done()
    latch.set()
    assert after.done()


async def test_first_done_returns_without_cancelling_the_others() -> None:
    """first_done wakes on the first future and neither cancels nor completes the rest."""
    loop = asyncio.get_running_loop()
    first: asyncio.Future[int] = loop.create_future()
    other: asyncio.Future[int] = loop.create_future()
    waiting = asyncio.create_task(first_done(first, other))
    await asyncio.sleep(0)
    assert not waiting.done()
    first.set_result(1)
    await waiting
    assert not other.done()


async def test_wait_event_mixes_latches_plain_events_and_the_clock() -> None:
    """wait_event returns True for a set latch or plain event, False when the clock runs out."""
    clock = FakeClock()
    latch, plain = LatchEvent(), asyncio.Event()
    waiting = asyncio.create_task(wait_event(clock, None, latch, plain))
    await asyncio.sleep(0)
    plain.set()
    assert await waiting is True
    waiting = asyncio.create_task(wait_event(clock, None, LatchEvent(), latch))
    await asyncio.sleep(0)
    latch.set()
    assert await waiting is True
    timed = asyncio.create_task(wait_event(clock, 5.0, LatchEvent()))
    await clock.run_until_idle()
    await clock.advance_async(5)
    assert await timed is False
