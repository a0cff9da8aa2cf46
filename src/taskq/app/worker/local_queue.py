"""The bounded in-process queue between the producer and the consumers.

Like ``asyncio.Queue`` but cheaper on the hot path, and closable: a closed
queue answers ``get()`` with None, so consumers waiting on it return without
racing every wait against the shutdown event.

A put with a consumer waiting hands the item to that consumer at once, so
the slot is free for the producer's next claim before the consumer has even
run (the claim's round trip then overlaps the consumers' work). Until the
woken consumer runs, the item is *handed*, not yet taken: ``clear()`` (the
shutdown's drain) still finds and revokes it, and the consumer then waits
again, so a job is always either queued, handed, or in a consumer's hands.
``take_out()`` revokes the items it selects the same way (the heartbeat takes
out jobs whose cancel was requested before they started).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LocalQueue(Generic[T]):
    """A FIFO of at most ``maxsize`` queued items; ``close()`` releases every waiter.

    Handed items (given to a waiting consumer that has not run yet) do not
    count against ``maxsize``: each belongs to one consumer, as a running job does.
    Only an explicit ``overfill`` put queues past ``maxsize``.
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self._items: deque[T] = deque()
        self._waiters: deque[asyncio.Future[None]] = deque()
        # Waiter -> the item handed to it; removed when the waiter takes it or clear() revokes it.
        self._handed: dict[asyncio.Future[None], T] = {}
        self.closed = False

    def __repr__(self) -> str:
        return (
            f"<LocalQueue {len(self._items)}/{self.maxsize} handed={len(self._handed)} "
            f"waiters={len(self._waiters)}>"
        )

    def qsize(self) -> int:
        """Items queued for no consumer yet (handed items excluded)."""
        return len(self._items)

    def empty(self) -> bool:
        """Nothing queued and nothing handed to a consumer that has not taken it."""
        return not self._items and not self._handed

    def idle(self) -> int:
        """Consumers waiting for an item now: the next ``idle()`` puts go straight to them
        (in order: a waiter that arrives later is handed a later item)."""
        if self._items:
            return 0
        return sum(1 for waiter in self._waiters if not waiter.done())

    def free(self) -> int:
        """Slots left below ``maxsize`` (0 when it is overfilled)."""
        return max(self.maxsize - len(self._items), 0)

    def put_nowait(self, item: T, *, overfill: bool = False) -> None:
        """Hand ``item`` to a waiting consumer, else queue it; ``asyncio.QueueFull`` when
        neither is possible (a producer bug), unless ``overfill``: then it is queued past
        ``maxsize`` (a claim made for slots the consumers were expected to free)."""
        if self._hand(item):
            return
        if len(self._items) >= self.maxsize and not overfill:
            raise asyncio.QueueFull(f"local queue is full ({self.maxsize})")
        self._items.append(item)

    def get_nowait(self) -> T | None:
        """The next queued item, or None when none is queued."""
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
                if waiter in self._handed:
                    # Cancelled after a put handed us an item: pass it on, nothing is lost.
                    self._requeue(self._handed.pop(waiter))
                else:
                    self._discard(waiter)
                raise
            if waiter in self._handed and not self._closed_now():
                return self._handed.pop(waiter)
            # Woken by close() (a handed item stays for clear(): the drain owns it now),
            # or the item was revoked by clear(): look again.

    def snapshot(self) -> list[T]:
        """Everything queued or handed but not taken, left in place."""
        return [*self._handed.values(), *self._items]

    def take_out(self, wanted: Callable[[T], bool]) -> list[T]:
        """Remove and return the queued or handed (not taken) items ``wanted`` selects,
        handed ones first, then in queue order; a consumer whose handed item is taken out
        waits again."""
        out: list[T] = []
        for waiter, item in list(self._handed.items()):
            if wanted(item):
                del self._handed[waiter]  # its consumer, when it runs, looks again
                out.append(item)
        staying: deque[T] = deque()
        for item in self._items:
            (out if wanted(item) else staying).append(item)
        self._items = staying
        return out

    def clear(self) -> list[T]:
        """Remove and return everything queued or handed but not taken (the shutdown's drain)."""
        items = self.snapshot()
        self._handed.clear()
        self._items.clear()
        return items

    def close(self) -> None:
        """No more gets wait: every waiter, present and future, gets None."""
        self.closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _closed_now(self) -> bool:
        # A method, not the attribute: close() may have run while get() was suspended.
        return self.closed

    def _hand(self, item: T) -> bool:
        """Give ``item`` to the longest-waiting live consumer; False when none waits."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._handed[waiter] = item
                waiter.set_result(None)
                return True
        return False

    def _requeue(self, item: T) -> None:
        if not self._hand(item):
            self._items.appendleft(item)  # may briefly exceed maxsize: it was counted as handed

    def _discard(self, waiter: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)


__all__ = ["LocalQueue"]
