"""Group commit: many consumers' writes of one kind, sent as one round trip.

Per-job round trips are the throughput ceiling, so start marks and terminal
writes go through a :class:`GroupCommit`. There is no timer: the first item
wakes the flusher, which yields once so the consumers that finished in the
same loop iteration can add theirs, then sends everything queued (at most
``max_batch``). Items submitted while a flush is in flight form the next
batch, so a busy worker batches naturally and an idle one adds no latency.

Each submitter gets a future with its own item's result; a flush that
raises fails every future of that batch with the same error, and a flush
may fail one item alone by returning an exception as its result.

An item can depend on when it is sent: with ``prepare``, each item is
passed through it as it leaves the queue (the worker measures a terminal
write's ``started_ago`` then, so the server, which subtracts it from its own
clock at the write, records the job's true start however long the write
waited for its round trip).

Another round trip can carry the items instead: :meth:`take` hands them
over (the caller answers them with :meth:`settle` or :meth:`fail`), and
while a caller announces such a trip (:meth:`hold`) the flusher waits for
it, so what accumulates meanwhile rides on the next one. The worker's
producer does this with terminal writes: they travel with its next claim.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

Flush = Callable[[Sequence[T]], Awaitable[Sequence[R | Exception]]]


class GroupCommit(Generic[T, R]):
    """Batch ``submit``-ted items through ``flush``, which returns one result per item.

    Run :meth:`run` as a task; :meth:`close` flushes what is queued and stops it.
    """

    def __init__(
        self,
        name: str,
        flush: Flush[T, R],
        *,
        max_batch: int = 100,
        prepare: Callable[[T], T] | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.name = name
        self._flush = flush
        self._max_batch = max_batch
        self._prepare = prepare
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._has_items = asyncio.Event()
        self._closing = False
        self._holds = 0
        self._released = asyncio.Event()
        self.flushes = 0

    def __repr__(self) -> str:
        return f"<GroupCommit {self.name} queued={len(self._queue)} flushes={self.flushes}>"

    def submit(self, item: T) -> asyncio.Future[R]:
        """Queue ``item``; the future resolves with its result once its batch is written."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        if self._closing:
            future.set_exception(RuntimeError(f"{self.name} batcher is closed"))
            return future
        self._queue.append((item, future))
        self._has_items.set()
        return future

    async def run(self) -> None:
        """Flush batches until closed and empty."""
        while True:
            await self._has_items.wait()
            # One yield: consumers that finished in this loop iteration join the batch.
            await asyncio.sleep(0)
            while self._holds and not self._closing:
                # A trip that carries items is under way: what is queued waits for the next
                # one (which the holder starts in the same step as it lets go, if at all).
                self._released.clear()
                await self._released.wait()
                await asyncio.sleep(0)
            while self._queue:
                await self._flush_one()
            self._has_items.clear()
            if self._closing:
                return

    async def close(self, runner: asyncio.Task[None] | None) -> None:
        """Stop accepting items, let ``runner`` write what is queued, then end it."""
        self._closing = True
        self._has_items.set()
        self._released.set()  # a held flusher writes what is left now
        if runner is not None and not runner.done():
            await runner
        # Without a live runner, nobody will answer: write what is left here.
        while self._queue:
            await self._flush_one()

    def hold(self) -> None:
        """A trip that may carry items has started: the flusher waits until :meth:`release`."""
        self._holds += 1

    def release(self) -> None:
        self._holds -= 1
        if not self._holds:
            self._released.set()

    def take(self) -> list[tuple[T, asyncio.Future[R]]]:
        """Hand over what is queued (at most ``max_batch``) for a round trip to write now."""
        batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
        prepare = self._prepare
        if prepare is None:
            return batch
        return [(prepare(item), future) for item, future in batch]

    @staticmethod
    def fail(batch: Sequence[tuple[T, asyncio.Future[R]]], exc: BaseException | None) -> None:
        """The trip carrying ``batch`` failed with ``exc`` (None: it was cancelled)."""
        for _, future in batch:
            if not future.done():
                if exc is None:
                    future.cancel()
                else:
                    future.set_exception(exc)

    async def _flush_one(self) -> None:
        batch = self.take()
        items = [item for item, _ in batch]
        try:
            results = await self._flush(items)
        except Exception as exc:
            self.fail(batch, exc)
            return
        except BaseException:
            self.fail(batch, None)
            raise
        finally:
            self.flushes += 1
        self.settle(batch, results)

    def settle(
        self, batch: Sequence[tuple[T, asyncio.Future[R]]], results: Sequence[R | Exception]
    ) -> None:
        """Answer each item of ``batch`` with its result (one per item, in order)."""
        if len(results) != len(batch):
            error = RuntimeError(
                f"{self.name}: flush returned {len(results)} results for {len(batch)} items"
            )
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                if isinstance(result, BaseException):
                    future.set_exception(result)  # this item's own failure
                else:
                    future.set_result(result)
