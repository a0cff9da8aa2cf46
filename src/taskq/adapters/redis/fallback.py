"""A RateLimiter that falls back to a second limiter while the first one fails.

Used to put Postgres behind Redis (``TASKQ_RATE_LIMIT_PG_FALLBACK_ENABLED``):
when Redis raises ``RateLimitUnavailable`` the same call is answered by the
fallback. The two backends keep separate counters, so during an outage the
limits hold per backend rather than across both; that over-admits at most
one extra window's worth, which beats refusing all work. With the fallback
disabled the error propagates and the caller fails closed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TypeVar

from taskq.domain.errors import RateLimitUnavailable
from taskq.ports.rate_limiter import RateDecision, RateLimiter, RatePermit, Reservation

T = TypeVar("T")

log = logging.getLogger("taskq.rate_limit")


@dataclass(frozen=True, slots=True, kw_only=True)
class _FallbackPermit(RatePermit):
    """A permit the fallback granted, so its refund goes to the fallback."""


class FallbackRateLimiter:
    def __init__(
        self, primary: RateLimiter, fallback: RateLimiter, *, enabled: bool = True
    ) -> None:
        self._primary = primary
        self._fallback = fallback
        self._enabled = enabled
        self.fallbacks = 0  # how many calls the fallback answered (observable in tests/metrics)

    async def _call(
        self,
        what: str,
        primary: Callable[[], Awaitable[T]],
        fallback: Callable[[], Awaitable[T]],
    ) -> T:
        try:
            return await primary()
        except RateLimitUnavailable as exc:
            if not self._enabled:
                raise
            self.fallbacks += 1
            log.warning("rate-limit-fallback", extra={"operation": what, "error": str(exc)})
            return await fallback()

    async def acquire_rate(
        self, key: str, *, limit: int, window: timedelta, now: datetime | None = None
    ) -> RateDecision:
        async def from_fallback() -> RateDecision:
            decision = await self._fallback.acquire_rate(key, limit=limit, window=window, now=now)
            if decision.permit is None:
                return decision
            permit = decision.permit
            tagged = _FallbackPermit(
                key=permit.key, window=permit.window, window_start=permit.window_start
            )
            return replace(decision, permit=tagged)

        return await self._call(
            "acquire_rate",
            lambda: self._primary.acquire_rate(key, limit=limit, window=window, now=now),
            from_fallback,
        )

    async def refund_rate(self, permit: RatePermit) -> None:
        # Back to the backend that counted it: the other one's window never held it.
        if isinstance(permit, _FallbackPermit):
            plain = RatePermit(
                key=permit.key, window=permit.window, window_start=permit.window_start
            )
            await self._fallback.refund_rate(plain)
        else:
            await self._primary.refund_rate(permit)

    async def reserve(
        self,
        key: str,
        *,
        capacity: int,
        holder: str,
        lease: timedelta,
        now: datetime | None = None,
    ) -> Reservation | None:
        return await self._call(
            "reserve",
            lambda: self._primary.reserve(
                key, capacity=capacity, holder=holder, lease=lease, now=now
            ),
            lambda: self._fallback.reserve(
                key, capacity=capacity, holder=holder, lease=lease, now=now
            ),
        )

    async def release(self, reservation: Reservation) -> None:
        # A reservation may come from either backend; releasing on both is idempotent.
        try:
            await self._primary.release(reservation)
        except RateLimitUnavailable:
            if not self._enabled:
                raise
        if self._enabled:
            await self._fallback.release(reservation)

    async def extend(self, holder: str, *, lease: timedelta, now: datetime | None = None) -> int:
        total = 0
        try:
            total += await self._primary.extend(holder, lease=lease, now=now)
        except RateLimitUnavailable:
            if not self._enabled:
                raise
        if self._enabled:
            total += await self._fallback.extend(holder, lease=lease, now=now)
        return total

    async def sweep_expired(self, *, now: datetime | None = None) -> int:
        return await self._call(
            "sweep_expired",
            lambda: self._primary.sweep_expired(now=now),
            lambda: self._fallback.sweep_expired(now=now),
        )

    async def close(self) -> None:
        await self._primary.close()
        await self._fallback.close()
