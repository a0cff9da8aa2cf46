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


async def test_a_hold_keeps_items_for_the_trip_that_takes_them() -> None:
    """While a trip that carries items is announced, the flusher writes nothing; the
    trip takes what is queued and answers it; what is left after release is flushed."""
    batches: list[list[int]] = []

    async def flush(items: Sequence[int]) -> list[int]:
        batches.append(list(items))
        return [-i for i in items]

    batcher: GroupCommit[int, int] = GroupCommit("t", flush)
    runner = asyncio.create_task(batcher.run())
    batcher.hold()
    carried = [batcher.submit(1), batcher.submit(2)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert batches == []  # held: nothing flushed on its own
    taken = batcher.take()
    assert [item for item, _ in taken] == [1, 2]
    later = batcher.submit(3)
    batcher.settle(taken, [10, 20])
    assert [f.result() for f in carried] == [10, 20]
    batcher.release()
    assert await later == -3
    assert batches == [[3]]
    await batcher.close(runner)


async def test_a_failed_or_cancelled_trip_fails_the_items_it_took() -> None:
    """fail(batch, exc) sets exc on each future; fail(batch, None) cancels them."""

    async def flush(items: Sequence[int]) -> list[int]:
        return list(items)

    batcher: GroupCommit[int, int] = GroupCommit("t", flush)
    first = batcher.submit(1)
    GroupCommit.fail(batcher.take(), ConnectionError("down"))
    with pytest.raises(ConnectionError):
        await first
    second = batcher.submit(2)
    GroupCommit.fail(batcher.take(), None)
    assert second.cancelled()
    await batcher.close(None)


async def test_close_ends_a_held_flusher_and_writes_what_is_left() -> None:
    """A hold never outlives close: the flusher writes what is queued and stops."""
    written: list[int] = []

    async def flush(items: Sequence[int]) -> list[None]:
        written.extend(items)
        return [None] * len(items)

    batcher: GroupCommit[int, None] = GroupCommit("t", flush)
    runner = asyncio.create_task(batcher.run())
    batcher.hold()
    pending = batcher.submit(7)
    await asyncio.sleep(0)
    await asyncio.wait_for(batcher.close(runner), 5)
    assert written == [7]
    assert pending.done()


async def test_a_prepared_item_is_prepared_as_it_leaves() -> None:
    """With ``prepare``, each item passes through it when it is sent, not when it was
    submitted: a flushed batch and a batch taken by another round trip alike."""
    sent_at = [0]
    sent: list[tuple[int, int]] = []

    async def flush(items: Sequence[tuple[int, int]]) -> list[None]:
        sent.extend(items)
        return [None for _ in items]

    batcher: GroupCommit[tuple[int, int], None] = GroupCommit(
        "t", flush, prepare=lambda item: (item[0], sent_at[0])
    )
    batcher.submit((1, 0))
    batcher.submit((2, 0))
    sent_at[0] = 5
    taken = batcher.take()
    assert [item for item, _ in taken] == [(1, 5), (2, 5)]
    batcher.settle(taken, [None, None])
    batcher.submit((3, 0))
    sent_at[0] = 7
    runner = asyncio.create_task(batcher.run())
    await batcher.close(runner)
    assert sent == [(3, 7)]
