"""RateLimiter: fixed windows and concurrency reservations, exact under concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import datetime, timedelta

import pytest
import pytest_asyncio

from taskq.ports.rate_limiter import RateDecision, RateLimiter, RatePermit, Reservation
from taskq.testing.harness import EPOCH, Harness
from taskq.testing.plugin import named_ports

from .helpers import TICK, at

pytestmark = pytest.mark.taskq_ports("rate_limiter")

SECOND = timedelta(seconds=1)
LEASE = timedelta(seconds=10)


@pytest_asyncio.fixture
async def limiters(
    harness: Harness, request: pytest.FixtureRequest
) -> AsyncIterator[list[RateLimiter]]:
    """Four limiter instances on the adapter's shared state (skips when it has none, unless
    ``--taskq-ports`` names rate_limiter: then a green run would have tested nothing)."""
    opener = harness.open_rate_limiter
    if opener is None:
        if "rate_limiter" in named_ports(request.config):
            pytest.fail(
                f"adapter {harness.name!r} provides no rate limiter (open_rate_limiter is "
                "None), but --taskq-ports names rate_limiter"
            )
        pytest.skip(f"adapter {harness.name!r} provides no rate limiter")
    async with AsyncExitStack() as stack:
        opened: list[RateLimiter] = []
        for _ in range(4):
            limiter = await opener()
            stack.push_async_callback(limiter.close)
            opened.append(limiter)
        yield opened


async def test_window_allows_exactly_limit_under_concurrency(limiters: list[RateLimiter]) -> None:
    """Fifty concurrent acquires in one window with limit 10 allow exactly 10, across instances."""
    decisions = await asyncio.gather(
        *(
            limiters[i % len(limiters)].acquire_rate("k", limit=10, window=SECOND, now=at(0.25))
            for i in range(50)
        )
    )
    assert all(isinstance(d, RateDecision) for d in decisions)
    assert sum(d.allowed for d in decisions) == 10
    # Windows are aligned to the epoch, so this one ends at EPOCH + 1s.
    assert {d.retry_after for d in decisions if not d.allowed} == {timedelta(seconds=0.75)}


async def test_next_window_allows_again(limiters: list[RateLimiter]) -> None:
    """The next epoch-aligned window starts at the window boundary and allows limit calls again."""
    limiter = limiters[0]
    window = timedelta(seconds=10)
    assert (await limiter.acquire_rate("k", limit=2, window=window, now=at(3))).allowed
    assert (await limiter.acquire_rate("k", limit=2, window=window, now=at(4))).allowed
    denied = await limiter.acquire_rate("k", limit=2, window=window, now=at(10) - TICK)
    assert denied == RateDecision(False, TICK)
    assert (await limiter.acquire_rate("k", limit=2, window=window, now=at(10))).allowed
    assert (await limiter.acquire_rate("k", limit=2, window=window, now=at(11))).allowed
    assert not (await limiter.acquire_rate("k", limit=2, window=window, now=at(12))).allowed


async def test_keys_have_separate_windows(limiters: list[RateLimiter]) -> None:
    """Permits for one key do not use up another key's window."""
    limiter = limiters[0]
    assert (await limiter.acquire_rate("x", limit=1, window=SECOND, now=at(0))).allowed
    assert not (await limiter.acquire_rate("x", limit=1, window=SECOND, now=at(0))).allowed
    assert (await limiter.acquire_rate("y", limit=1, window=SECOND, now=at(0))).allowed


# --- refunds -----------------------------------------------------------------------------


async def _granted(limiter: RateLimiter, key: str, limit: int, now: datetime) -> RatePermit:
    decision = await limiter.acquire_rate(key, limit=limit, window=SECOND, now=now)
    assert decision.allowed, decision
    assert decision.permit is not None
    return decision.permit


async def test_a_grant_carries_its_permit_and_a_denial_none(limiters: list[RateLimiter]) -> None:
    """An allowed call returns the permit it counted (key, window, epoch-aligned start)."""
    limiter = limiters[0]
    permit = await _granted(limiter, "k", 1, at(2.25))
    assert permit == RatePermit(key="k", window=SECOND, window_start=at(2))
    denied = await limiter.acquire_rate("k", limit=1, window=SECOND, now=at(2.5))
    assert (denied.allowed, denied.permit) == (False, None)


async def test_a_refunded_permit_can_be_granted_again(limiters: list[RateLimiter]) -> None:
    """refund_rate gives one permit back to its window: one more call is allowed, not two."""
    permit = await _granted(limiters[0], "k", 2, at(0.1))
    await _granted(limiters[1], "k", 2, at(0.2))
    # Denied calls count nothing, so a refund after them still frees a permit.
    for _ in range(3):
        assert not (
            await limiters[2].acquire_rate("k", limit=2, window=SECOND, now=at(0.3))
        ).allowed
    await limiters[3].refund_rate(permit)
    assert (await limiters[2].acquire_rate("k", limit=2, window=SECOND, now=at(0.4))).allowed
    assert not (await limiters[2].acquire_rate("k", limit=2, window=SECOND, now=at(0.5))).allowed


async def test_a_refund_never_frees_more_than_was_granted(limiters: list[RateLimiter]) -> None:
    """Refunds past zero change nothing: the window still allows exactly ``limit`` calls."""
    limiter = limiters[0]
    permit = await _granted(limiter, "k", 1, at(0))
    await limiter.refund_rate(permit)
    await limiter.refund_rate(permit)
    assert (await limiter.acquire_rate("k", limit=1, window=SECOND, now=at(0.5))).allowed
    assert not (await limiter.acquire_rate("k", limit=1, window=SECOND, now=at(0.5))).allowed


async def test_a_refund_goes_to_its_own_window(limiters: list[RateLimiter]) -> None:
    """A permit of an ended window refunded later adds nothing to the current window or key."""
    limiter = limiters[0]
    old = await _granted(limiter, "k", 1, at(0.5))
    await _granted(limiter, "k", 1, at(1.5))
    await _granted(limiter, "other", 1, at(1.5))
    await limiter.refund_rate(old)
    assert not (await limiter.acquire_rate("k", limit=1, window=SECOND, now=at(1.6))).allowed
    assert not (await limiter.acquire_rate("other", limit=1, window=SECOND, now=at(1.6))).allowed


async def test_refunds_and_acquires_race_without_overshoot(limiters: list[RateLimiter]) -> None:
    """Ten granted, five refunded while callers race: exactly five more are ever allowed."""
    permits = [await _granted(limiters[i % 4], "k", 10, at(0.1)) for i in range(10)]
    outcomes = await asyncio.gather(
        *(limiters[i % 4].refund_rate(p) for i, p in enumerate(permits[:5])),
        *(
            limiters[i % 4].acquire_rate("k", limit=10, window=SECOND, now=at(0.2))
            for i in range(20)
        ),
    )
    racing = sum(d.allowed for d in outcomes if isinstance(d, RateDecision))
    after = [
        await limiters[0].acquire_rate("k", limit=10, window=SECOND, now=at(0.3)) for _ in range(10)
    ]
    assert racing + sum(d.allowed for d in after) == 5


# --- reservations ------------------------------------------------------------------------


async def _reserve(
    limiter: RateLimiter,
    holder: str,
    *,
    key: str = "k",
    capacity: int = 3,
    now: datetime = EPOCH,
) -> Reservation | None:
    return await limiter.reserve(key, capacity=capacity, holder=holder, lease=LEASE, now=now)


async def test_reservations_never_exceed_capacity_under_concurrency(
    limiters: list[RateLimiter],
) -> None:
    """Twenty concurrent reservers on several instances get exactly capacity distinct slots."""
    results = await asyncio.gather(
        *(_reserve(limiters[i % len(limiters)], f"h{i}") for i in range(20))
    )
    held = [r for r in results if r is not None]
    assert len(held) == 3
    assert sorted(r.slot for r in held) == [0, 1, 2]
    assert len({r.token for r in held}) == 3
    assert all(r.key == "k" for r in held)
    assert await _reserve(limiters[0], "late", now=at(1)) is None


async def test_release_frees_the_slot(limiters: list[RateLimiter]) -> None:
    """Releasing a reservation lets the next reserver take its slot; a second release is a no-op."""
    first = await _reserve(limiters[0], "h1", capacity=2)
    second = await _reserve(limiters[1], "h2", capacity=2)
    assert first is not None
    assert second is not None
    assert await _reserve(limiters[2], "h3", capacity=2) is None
    await limiters[0].release(first)
    await limiters[0].release(first)
    third = await _reserve(limiters[2], "h3", capacity=2, now=at(1))
    assert third is not None
    assert third.slot == first.slot
    assert await _reserve(limiters[3], "h4", capacity=2, now=at(1)) is None


async def test_expiry_frees_the_slot(limiters: list[RateLimiter]) -> None:
    """A reservation not extended stops counting once its lease has run out."""
    assert await _reserve(limiters[0], "h1", capacity=1) is not None
    assert await _reserve(limiters[1], "h2", capacity=1, now=at(10) - TICK) is None
    assert await _reserve(limiters[1], "h2", capacity=1, now=at(10) + TICK) is not None


async def test_stale_release_does_not_free_a_reused_slot(limiters: list[RateLimiter]) -> None:
    """Releasing an expired reservation whose slot was reused leaves the new holder in place."""
    old = await _reserve(limiters[0], "h1", capacity=1)
    assert old is not None
    new = await _reserve(limiters[1], "h2", capacity=1, now=at(11))
    assert new is not None
    await limiters[0].release(old)
    assert await _reserve(limiters[2], "h3", capacity=1, now=at(12)) is None


async def test_extend_keeps_reservations_alive(limiters: list[RateLimiter]) -> None:
    """extend() pushes every live reservation of the holder to now + lease and counts them."""
    assert await _reserve(limiters[0], "h1", key="k1", capacity=1) is not None
    assert await _reserve(limiters[0], "h1", key="k2", capacity=1) is not None
    assert await _reserve(limiters[0], "other", key="k3", capacity=1) is not None
    assert await limiters[1].extend("h1", lease=LEASE, now=at(8)) == 2
    assert await _reserve(limiters[2], "h2", key="k1", capacity=1, now=at(15)) is None
    assert await _reserve(limiters[2], "h2", key="k3", capacity=1, now=at(15)) is not None
    assert await _reserve(limiters[2], "h2", key="k2", capacity=1, now=at(18) + TICK) is not None
    assert await limiters[1].extend("nobody", lease=LEASE, now=at(19)) == 0


async def test_expired_reservations_are_not_extended(limiters: list[RateLimiter]) -> None:
    """extend() does not revive a reservation whose lease already ran out."""
    assert await _reserve(limiters[0], "h1", capacity=1) is not None
    assert await limiters[0].extend("h1", lease=LEASE, now=at(30)) == 0
    assert await _reserve(limiters[1], "h2", capacity=1, now=at(30)) is not None


async def test_sweep_deletes_expired_reservations(limiters: list[RateLimiter]) -> None:
    """sweep_expired removes exactly the expired reservations and reports how many."""
    assert await _reserve(limiters[0], "h1", key="k1", capacity=1, now=at(0)) is not None
    assert await _reserve(limiters[0], "h2", key="k2", capacity=1, now=at(0)) is not None
    assert await _reserve(limiters[0], "h3", key="k3", capacity=1, now=at(5)) is not None
    assert await limiters[1].sweep_expired(now=at(12)) == 2
    assert await limiters[1].sweep_expired(now=at(12)) == 0
    assert await _reserve(limiters[2], "h4", key="k3", capacity=1, now=at(12)) is None
