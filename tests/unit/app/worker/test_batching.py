"""Group commit: writes submitted together share one round trip; errors reach each caller."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from taskq.app.worker.batching import GroupCommit


async def test_items_submitted_together_share_one_flush() -> None:
    """Items queued in the same loop iteration go out as one batch, results in order."""
    batches: list[list[int]] = []

    async def flush(items: Sequence[int]) -> list[int]:
        batches.append(list(items))
        return [i * 2 for i in items]

    batcher: GroupCommit[int, int] = GroupCommit("t", flush, max_batch=3)
    runner = asyncio.create_task(batcher.run())
    futures = [batcher.submit(i) for i in range(5)]
    assert await asyncio.gather(*futures) == [0, 2, 4, 6, 8]
    assert batches == [[0, 1, 2], [3, 4]]
    await batcher.close(runner)
    assert runner.done()


async def test_a_failing_flush_fails_every_item_of_its_batch() -> None:
    """The flush's exception is set on each waiting future; the batcher keeps going."""
    calls = 0

    async def flush(items: Sequence[int]) -> list[int]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("down")
        return list(items)

    batcher: GroupCommit[int, int] = GroupCommit("t", flush)
    runner = asyncio.create_task(batcher.run())
    first = [batcher.submit(1), batcher.submit(2)]
    for future in first:
        with pytest.raises(ConnectionError):
            await future
    assert await batcher.submit(3) == 3
    await batcher.close(runner)


async def test_close_writes_what_is_queued_and_refuses_more() -> None:
    """Closing flushes pending items; a submit after close fails at once."""
    written: list[int] = []

    async def flush(items: Sequence[int]) -> list[None]:
        written.extend(items)
        return [None] * len(items)

    batcher: GroupCommit[int, None] = GroupCommit("t", flush)
    pending = batcher.submit(1)
    await batcher.close(None)
    assert written == [1]
    assert pending.done()
    with pytest.raises(RuntimeError, match="closed"):
        await batcher.submit(2)
