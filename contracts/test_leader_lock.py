"""LeaderLock: one holder at a time, release hands over, a severed holder loses the lock."""

from __future__ import annotations

import asyncio

import pytest

from taskq.testing.harness import Harness

pytestmark = pytest.mark.taskq_ports("leader_lock")


async def test_only_one_instance_acquires(harness: Harness) -> None:
    """Of two instances, the first to try holds the lock and the second is refused."""
    first = await harness.open_leader_lock()
    second = await harness.open_leader_lock()
    assert await first.try_acquire() is True
    assert await second.try_acquire() is False
    assert (first.held, second.held) == (True, False)
    assert await first.try_acquire() is True  # re-acquiring what one holds is fine
    assert (first.held, second.held) == (True, False)


async def test_release_lets_another_instance_acquire(harness: Harness) -> None:
    """After the holder releases, another instance acquires; releasing twice is harmless."""
    first = await harness.open_leader_lock()
    second = await harness.open_leader_lock()
    assert await first.try_acquire()
    await first.release()
    await first.release()
    assert first.held is False
    assert await second.try_acquire() is True
    assert await first.try_acquire() is False
    assert (first.held, second.held) == (False, True)


async def test_close_releases_the_lock(harness: Harness) -> None:
    """Closing the holder frees the lock for another instance."""
    first = await harness.open_leader_lock()
    second = await harness.open_leader_lock()
    assert await first.try_acquire()
    await first.close()
    assert await second.try_acquire() is True


async def test_probe_tells_the_holder_from_the_others(harness: Harness) -> None:
    """probe() is True for the live holder and False for an instance that does not hold the lock."""
    first = await harness.open_leader_lock()
    second = await harness.open_leader_lock()
    assert await first.try_acquire()
    assert await first.probe() is True
    assert first.held is True
    assert await second.probe() is False
    assert second.held is False


async def test_concurrent_acquirers_elect_exactly_one(harness: Harness) -> None:
    """Ten instances racing try_acquire produce exactly one holder."""
    locks = [await harness.open_leader_lock() for _ in range(10)]
    won = await asyncio.gather(*(lock.try_acquire() for lock in locks))
    assert sum(won) == 1
    assert [lock.held for lock in locks] == won


async def test_severed_holder_loses_the_lock_to_another(harness: Harness) -> None:
    """A severed holder's probe() is False and held drops; another instance then acquires."""
    holder = await harness.open_leader_lock()
    rival = await harness.open_leader_lock()
    assert await holder.try_acquire()
    assert await rival.try_acquire() is False
    await harness.sever(holder)
    assert await holder.probe() is False
    assert holder.held is False
    assert await rival.try_acquire() is True
    assert rival.held is True
