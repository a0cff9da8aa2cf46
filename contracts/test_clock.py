"""The harness clock (Clock port) and the store's liveness check."""

from __future__ import annotations

from datetime import timedelta

from taskq.testing.harness import Harness

from .helpers import within


async def test_clock_now_is_utc_and_never_goes_back(harness: Harness) -> None:
    """Clock.now() is timezone-aware UTC and does not go backwards between calls."""
    first = harness.clock.now()
    second = harness.clock.now()
    assert first.utcoffset() == timedelta(0)
    assert second >= first
    assert harness.clock.monotonic() <= harness.clock.monotonic()


async def test_clock_sleep_zero_returns(harness: Harness) -> None:
    """Clock.sleep(0) returns without anyone advancing the clock."""
    await within(harness.clock.sleep(0), "clock.sleep(0)")


async def test_store_ping_succeeds(harness: Harness) -> None:
    """A healthy store's ping() returns."""
    await within(harness.store.ping(), "store.ping()")
