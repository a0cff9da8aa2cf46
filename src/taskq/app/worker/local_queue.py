"""The bounded in-process queue between the producer and the consumers.

Like ``asyncio.Queue`` but cheaper on the hot path, and closable: a closed
queue answers ``get()`` with None, so consumers waiting on it return without
racing every wait against the shutdown event.

A woken consumer takes its job off the queue itself when it runs, never at
``put`` time: until a consumer has it in hand, a job is in the queue, where
the shutdown's drain finds it (a job handed to a sleeping consumer would be
in neither place for a moment).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class LocalQueue(Generic[T]):
    """A FIFO of at most ``maxsize`` items; ``close()`` releases every waiter."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self._items: deque[T] = deque()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.closed = False

    def __repr__(self) -> str:
        return f"<LocalQueue {len(self._items)}/{self.maxsize} waiters={len(self._waiters)}>"

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def free(self) -> int:
        return self.maxsize - len(self._items)

    def put_nowait(self, item: T) -> None:
        """Queue ``item``; ``asyncio.QueueFull`` when there is no room (a producer bug)."""
        if len(self._items) >= self.maxsize:
            raise asyncio.QueueFull(f"local queue is full ({self.maxsize})")
        self._items.append(item)
        self._wake_one()

    def get_nowait(self) -> T | None:
        """The next item, or None when the queue is empty."""
        return self._items.popleft() if self._items else None

    async def get(self) -> T | None:
        """The next item, waiting for one; None once the queue is closed."""
        while True:
            if self.closed:
                return None
            if self._items:
                return self._items.popleft()
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                # Cancelled after a put woke us: pass the wake-up on, nothing is lost.
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()
                else:
                    self._discard(waiter)
                raise

    def clear(self) -> list[T]:
        """Remove and return everything queued (the shutdown's drain)."""
        items = list(self._items)
        self._items.clear()
        return items

    def close(self) -> None:
        """No more gets wait: every waiter, present and future, gets None."""
        self.closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _discard(self, waiter: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)


__all__ = ["LocalQueue"]
