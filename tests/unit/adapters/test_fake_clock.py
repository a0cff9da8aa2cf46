"""FakeClock (tests' time source) and SystemClock (production's)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING

import pytest

from taskq.adapters.memory import DEFAULT_START, FakeClock
from taskq.adapters.system_clock import SystemClock

if TYPE_CHECKING:
    from taskq.ports.clock import Clock

    _fake: Clock = FakeClock()
    _system: Clock = SystemClock()


async def _sleep_then_log(clock: FakeClock, seconds: float, log: list[str], name: str) -> None:
    await clock.sleep(seconds)
    log.append(name)


def test_starts_at_default_epoch() -> None:
    """A new FakeClock reads 2030-01-01T00:00Z and monotonic 0.0."""
    clock = FakeClock()
    assert clock.now() == datetime(2030, 1, 1, tzinfo=UTC) == DEFAULT_START
    assert clock.monotonic() == 0.0


def test_rejects_naive_or_non_utc_start() -> None:
    """The start must be timezone-aware UTC, so now() is always comparable."""
    with pytest.raises(ValueError, match="UTC"):
        FakeClock(datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="UTC"):
        FakeClock(datetime(2030, 1, 1, tzinfo=timezone(timedelta(hours=2))))


def test_advance_moves_now_and_monotonic_exactly() -> None:
    """Many small advances add up exactly (microsecond integer arithmetic, no float drift)."""
    clock = FakeClock()
    for _ in range(10):
        clock.advance(0.1)
    assert clock.now() == DEFAULT_START + timedelta(seconds=1)
    assert clock.monotonic() == 1.0


def test_advance_refuses_negative_and_non_finite() -> None:
    """Time never goes backwards and never jumps to infinity."""
    clock = FakeClock()
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="advance"):
            clock.advance(bad)
    assert clock.monotonic() == 0.0


def test_advance_to_moves_to_wall_time_and_refuses_the_past() -> None:
    """advance_to jumps to a wall time; a time before now is refused."""
    clock = FakeClock()
    target = DEFAULT_START + timedelta(minutes=5)
    clock.advance_to(target)
    assert clock.now() == target
    assert clock.monotonic() == 300.0
    with pytest.raises(ValueError, match="before now"):
        clock.advance_to(DEFAULT_START)


async def test_sleep_returns_only_after_advance_covers_it() -> None:
    """A sleeper stays parked until the clock has advanced by its full duration."""
    clock = FakeClock()
    log: list[str] = []
    task = asyncio.create_task(_sleep_then_log(clock, 10, log, "woke"))
    await clock.run_until_idle()
    assert clock.pending_sleepers == 1
    clock.advance(9.999999)
    await clock.run_until_idle()
    assert log == []
    clock.advance(0.000001)
    await clock.run_until_idle()
    assert log == ["woke"]
    assert clock.pending_sleepers == 0
    await task


async def test_sleepers_wake_in_deadline_order() -> None:
    """One big advance wakes every due sleeper, earliest deadline first, ties by call order."""
    clock = FakeClock()
    log: list[str] = []
    tasks = [
        asyncio.create_task(_sleep_then_log(clock, s, log, name))
        for name, s in (("c", 3), ("a", 1), ("b1", 2), ("b2", 2), ("late", 100))
    ]
    await clock.run_until_idle()
    clock.advance(5)
    await clock.run_until_idle()
    assert log == ["a", "b1", "b2", "c"]
    assert clock.pending_sleepers == 1
    tasks[-1].cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_sleep_zero_only_yields() -> None:
    """sleep(0) and negative sleeps return without any advance."""
    clock = FakeClock()
    await clock.sleep(0)
    await clock.sleep(-5)
    assert clock.pending_sleepers == 0
    assert clock.monotonic() == 0.0


async def test_sleep_rejects_nan() -> None:
    """A NaN duration is a bug in the caller, not a sleep forever."""
    with pytest.raises(ValueError, match="NaN"):
        await FakeClock().sleep(float("nan"))


async def test_cancelled_sleep_goes_away() -> None:
    """Cancelling a sleeping task removes its sleeper; a later advance is harmless."""
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(10))
    await clock.run_until_idle()
    assert clock.pending_sleepers == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.pending_sleepers == 0
    assert clock.next_deadline() is None
    clock.advance(20)
    await clock.run_until_idle()


async def test_infinite_sleep_never_wakes_but_cancels() -> None:
    """sleep(inf) parks until cancelled and has no deadline."""
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(float("inf")))
    await clock.run_until_idle()
    assert clock.pending_sleepers == 1
    assert clock.next_deadline() is None
    clock.advance(10**9)
    await clock.run_until_idle()
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_next_deadline_reports_seconds_until_earliest_sleeper() -> None:
    """next_deadline is relative to now and tracks the earliest pending sleeper."""
    clock = FakeClock()
    tasks = [asyncio.create_task(clock.sleep(s)) for s in (7, 3)]
    await clock.run_until_idle()
    assert clock.next_deadline() == 3.0
    clock.advance(1)
    assert clock.next_deadline() == 2.0
    clock.advance(2)
    await clock.run_until_idle()
    assert clock.next_deadline() == 4.0
    clock.advance(4)
    await asyncio.gather(*tasks)


async def test_advance_async_steps_through_each_deadline() -> None:
    """A periodic loop runs once per period during advance_async, seeing its own deadline."""
    clock = FakeClock()
    seen: list[float] = []

    async def every_ten_seconds() -> None:
        while True:
            await clock.sleep(10)
            seen.append(clock.monotonic())

    task = asyncio.create_task(every_ten_seconds())
    await clock.advance_async(60)
    assert seen == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    assert clock.monotonic() == 60.0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_plain_advance_jumps_past_intermediate_deadlines() -> None:
    """advance (unlike advance_async) wakes a periodic sleeper once for a long jump."""
    clock = FakeClock()
    seen: list[float] = []

    async def every_ten_seconds() -> None:
        while True:
            await clock.sleep(10)
            seen.append(clock.monotonic())

    task = asyncio.create_task(every_ten_seconds())
    await clock.run_until_idle()
    clock.advance(60)
    await clock.run_until_idle()
    assert seen == [60.0]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_run_until_idle_lets_chains_of_tasks_finish() -> None:
    """Work that hops across several tasks and yields completes within one run_until_idle."""
    clock = FakeClock()
    done = asyncio.Event()

    async def hop(n: int) -> None:
        for _ in range(50):
            await asyncio.sleep(0)
        if n == 0:
            done.set()
        else:
            asyncio.get_running_loop().create_task(hop(n - 1))

    task = asyncio.create_task(hop(5))
    await clock.run_until_idle()
    assert done.is_set()
    await task


async def test_sleep_works_across_wait_for_style_cancellation() -> None:
    """A timeout-style cancel of a fake sleep leaves the clock consistent for the next sleep."""
    clock = FakeClock()
    first = asyncio.create_task(clock.sleep(5))
    await clock.run_until_idle()
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    second = asyncio.create_task(clock.sleep(5))
    await clock.run_until_idle()
    clock.advance(5)
    await clock.run_until_idle()
    assert second.done()
    assert not second.cancelled()


def test_system_clock_reads_real_time() -> None:
    """SystemClock.now is aware UTC close to the real time; monotonic follows time.monotonic."""
    clock = SystemClock()
    before = datetime.now(UTC)
    now = clock.now()
    after = datetime.now(UTC)
    assert now.tzinfo is UTC
    assert before <= now <= after
    m0 = time.monotonic()
    m = clock.monotonic()
    assert m0 <= m <= time.monotonic()


async def test_system_clock_sleep_is_cancellable() -> None:
    """SystemClock.sleep is a plain cancellable await."""
    task = asyncio.create_task(SystemClock().sleep(3600))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_hold_keeps_fake_time_still_until_released() -> None:
    """advance_async waits (in real time) for a pending hold before moving time: work in a
    thread, invisible to the loop, is not outrun by fake time."""
    clock = FakeClock()
    release = clock.hold()
    asyncio.get_running_loop().call_later(0.05, release)
    started = time.monotonic()
    await clock.advance_async(1)
    assert time.monotonic() - started >= 0.04
    assert clock.monotonic() == 1.0


async def test_a_hold_lets_time_move_after_its_limit() -> None:
    """A hold never released (a thread that never returns) stops holding after its limit."""
    clock = FakeClock()
    clock.hold(limit=0.05)
    started = time.monotonic()
    await clock.advance_async(1)
    await clock.advance_async(1)
    assert clock.monotonic() == 2.0
    assert time.monotonic() - started < 1.0
