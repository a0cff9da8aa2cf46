"""LocalQueue: FIFO, bounded, closable; a put hands its item to a waiting consumer, revocably."""

from __future__ import annotations

import asyncio
from typing import TypeVar

import pytest

from taskq.app.worker.local_queue import LocalQueue

T = TypeVar("T")


async def settle() -> None:
    """Let every ready task run a few steps (no time passes: nothing here sleeps)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def result_of(task: asyncio.Task[T]) -> T:
    """The task's result once the loop settles; fails (rather than hangs) if it is still waiting."""
    await settle()
    assert task.done(), "still waiting"
    return task.result()


def test_maxsize_must_be_positive() -> None:
    """A queue without room is a configuration bug, named with the value."""
    with pytest.raises(ValueError, match="maxsize must be >= 1, got 0"):
        LocalQueue[int](0)


async def test_items_come_out_in_the_order_they_went_in() -> None:
    """put_nowait then get_nowait / get: first in, first out; sizes follow."""
    queue = LocalQueue[int](3)
    for item in (1, 2, 3):
        queue.put_nowait(item)
    assert (queue.qsize(), queue.free(), queue.empty()) == (3, 0, False)
    assert queue.get_nowait() == 1
    assert await queue.get() == 2
    assert queue.get_nowait() == 3
    assert (queue.qsize(), queue.free(), queue.empty()) == (0, 3, True)


async def test_put_beyond_maxsize_raises_queue_full() -> None:
    """A producer that overfills the queue gets QueueFull naming the size; nothing is added."""
    queue = LocalQueue[str](2)
    queue.put_nowait("a")
    queue.put_nowait("b")
    with pytest.raises(asyncio.QueueFull, match=r"local queue is full \(2\)"):
        queue.put_nowait("c")
    assert queue.clear() == ["a", "b"]


async def test_an_overfill_put_queues_past_maxsize() -> None:
    """A claim made ahead may not fit: overfill queues it anyway, free() stays 0 until
    the queue is below its size again, and the drain's clear() takes every item."""
    queue = LocalQueue[str](2)
    for item in "abcd":
        queue.put_nowait(item, overfill=True)
    assert (queue.qsize(), queue.free()) == (4, 0)
    with pytest.raises(asyncio.QueueFull):
        queue.put_nowait("e")
    assert queue.get_nowait() == "a"
    assert queue.get_nowait() == "b"
    assert (queue.qsize(), queue.free()) == (2, 0)
    assert queue.get_nowait() == "c"
    assert queue.free() == 1
    queue.put_nowait("e", overfill=True)
    assert queue.clear() == ["d", "e"]


async def test_get_nowait_on_an_empty_queue_returns_none() -> None:
    """No item: None at once, not an exception."""
    queue = LocalQueue[int](1)
    assert queue.get_nowait() is None
    queue.put_nowait(0)  # a falsy item is still an item
    assert queue.get_nowait() == 0
    assert queue.get_nowait() is None


async def test_a_waiting_get_receives_an_item_put_later() -> None:
    """get() on an empty queue waits; a later put hands it that item."""
    queue = LocalQueue[int](1)
    getter = asyncio.create_task(queue.get())
    await settle()
    assert not getter.done()
    queue.put_nowait(42)
    assert await result_of(getter) == 42
    assert queue.empty()


async def test_waiters_are_served_in_arrival_order() -> None:
    """Two waiting consumers, two puts: the first to wait gets the first item."""
    queue = LocalQueue[str](2)
    first = asyncio.create_task(queue.get())
    await settle()
    second = asyncio.create_task(queue.get())
    await settle()
    queue.put_nowait("a")
    queue.put_nowait("b")
    assert (await result_of(first), await result_of(second)) == ("a", "b")


async def test_close_releases_waiters_and_future_gets_with_none() -> None:
    """close(): every waiting get() returns None, and so does every later get()."""
    queue = LocalQueue[int](2)
    waiters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    assert not any(w.done() for w in waiters)
    queue.close()
    assert [await result_of(w) for w in waiters] == [None, None, None]
    assert await queue.get() is None
    assert queue.closed


async def test_get_on_a_closed_queue_returns_none_even_with_items() -> None:
    """Once closed, get() does not hand out what is left: the drain owns those items."""
    queue = LocalQueue[int](2)
    queue.put_nowait(1)
    queue.close()
    assert await queue.get() is None
    assert queue.clear() == [1]


async def test_clear_returns_and_removes_every_queued_item() -> None:
    """clear() gives back what was queued, in order, and leaves the queue empty."""
    queue = LocalQueue[int](3)
    assert queue.clear() == []
    queue.put_nowait(7)
    queue.put_nowait(8)
    assert queue.clear() == [7, 8]
    assert queue.empty()
    assert queue.free() == 3
    assert queue.get_nowait() is None


async def test_an_item_put_for_a_waiter_is_handed_but_revocable_until_the_waiter_runs() -> None:
    """A put with a consumer waiting frees the slot at once (the producer may claim
    again), yet the item is not lost in between: a clear() before the waiter runs
    takes it back (the drain sees it), and the waiter goes back to waiting."""
    queue = LocalQueue[int](1)
    getter = asyncio.create_task(queue.get())
    await settle()
    queue.put_nowait(5)
    assert (queue.qsize(), queue.free(), queue.empty()) == (0, 1, False)
    assert "handed=1" in repr(queue)
    assert queue.clear() == [5]
    assert queue.empty()
    await settle()
    assert not getter.done()  # nothing for it: it waits again
    queue.put_nowait(6)
    assert await result_of(getter) == 6
    assert queue.empty()


async def test_a_handed_item_counts_against_no_slot() -> None:
    """One item handed, then maxsize more queued: the handed one belongs to its consumer."""
    queue = LocalQueue[int](2)
    getter = asyncio.create_task(queue.get())
    await settle()
    for item in (1, 2, 3):
        queue.put_nowait(item)
    assert (queue.qsize(), queue.free()) == (2, 0)
    with pytest.raises(asyncio.QueueFull):
        queue.put_nowait(4)
    assert await result_of(getter) == 1
    assert queue.clear() == [2, 3]


async def test_clear_returns_handed_items_before_queued_ones() -> None:
    """The drain gets everything not yet taken, oldest first."""
    queue = LocalQueue[int](1)
    getter = asyncio.create_task(queue.get())
    await settle()
    queue.put_nowait(1)
    queue.put_nowait(2)
    assert queue.clear() == [1, 2]
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    assert queue.empty()


async def test_a_woken_waiter_returns_none_when_the_queue_closed_before_it_ran() -> None:
    """Handed an item, then the queue is cleared and closed before it runs: None."""
    queue = LocalQueue[int](1)
    getter = asyncio.create_task(queue.get())
    await settle()
    queue.put_nowait(5)
    assert queue.clear() == [5]
    queue.close()
    assert await result_of(getter) is None


async def test_a_handed_item_is_not_run_after_close() -> None:
    """Closed with an item handed but not taken: the waiter returns None and the item
    stays for clear() (after close the drain owns what is left)."""
    queue = LocalQueue[int](1)
    getter = asyncio.create_task(queue.get())
    await settle()
    queue.put_nowait(5)
    queue.close()
    assert await result_of(getter) is None
    assert queue.clear() == [5]


async def test_get_nowait_never_takes_an_item_handed_to_a_waiter() -> None:
    """Another consumer's get_nowait finds nothing: the item is the woken waiter's."""
    queue = LocalQueue[int](1)
    getter = asyncio.create_task(queue.get())
    await settle()
    queue.put_nowait(1)
    assert queue.get_nowait() is None
    assert await result_of(getter) == 1


async def test_a_waiter_cancelled_after_its_wake_up_passes_it_on() -> None:
    """Woken by a put and cancelled before it ran: the next waiter gets the item."""
    queue = LocalQueue[str](1)
    first = asyncio.create_task(queue.get())
    await settle()
    second = asyncio.create_task(queue.get())
    await settle()
    queue.put_nowait("job")  # handed to `first` only
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await settle()
    assert second.done(), "the wake-up was lost with the cancelled waiter"
    assert second.result() == "job"
    assert queue.empty()


async def test_a_handed_item_of_a_cancelled_waiter_is_queued_again_when_nobody_waits() -> None:
    """Handed, then its waiter cancelled with no other waiter: the item is queued, first in line."""
    queue = LocalQueue[str](2)
    only = asyncio.create_task(queue.get())
    await settle()
    queue.put_nowait("a")  # handed to `only`
    queue.put_nowait("b")  # queued
    only.cancel()
    with pytest.raises(asyncio.CancelledError):
        await only
    assert queue.get_nowait() == "a"
    assert queue.get_nowait() == "b"


async def test_a_waiter_cancelled_while_waiting_leaves_no_trace() -> None:
    """A waiter cancelled before any put is forgotten: the next put wakes a live waiter."""
    queue = LocalQueue[int](1)
    gone = asyncio.create_task(queue.get())
    await settle()
    live = asyncio.create_task(queue.get())
    await settle()
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert "waiters=1" in repr(queue)
    queue.put_nowait(3)
    assert await result_of(live) == 3


async def test_take_out_removes_only_the_selected_items_queued_or_handed() -> None:
    """take_out returns the selected items (handed first, then in queue order) and leaves
    the rest in order; a waiter whose handed item was taken out gets the next one."""
    queue = LocalQueue[int](4)
    waiter = asyncio.create_task(queue.get())
    await settle()
    for item in (1, 2, 3, 4):
        queue.put_nowait(item)  # 1 is handed to the waiter, 2 to 4 are queued
    assert queue.take_out(lambda item: item % 2 == 1) == [1, 3]
    assert await result_of(waiter) == 2
    assert queue.snapshot() == [4]
    assert queue.take_out(lambda item: item > 10) == []
    assert queue.get_nowait() == 4
