"""A RateLimiter that falls back to a second limiter while the first one fails.

Used to put Postgres behind Redis (``TASKQ_RATE_LIMIT_PG_FALLBACK_ENABLED``):
when Redis raises ``RateLimitUnavailable`` the same call is answered by the
fallback. The two backends keep separate counters, so during an outage the
limits hold per backend rather than across both; that over-admits at most
one extra window's worth, which beats refusing all work. With the fallback
disabled the error propagates and the caller fails closed.

An outage is logged twice, not once per call: ``rate-limit-fallback``
(WARNING) when the first call fails, ``rate-limit-fallback-ended`` (WARNING)
when a call succeeds again, with how many calls the fallback answered
meanwhile. Failures in between are logged at DEBUG.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final, TypeVar

from taskq.domain.errors import RateLimitUnavailable
from taskq.ports.rate_limiter import RateDecision, RateLimiter, RatePermit, Reservation

T = TypeVar("T")

log = logging.getLogger("taskq.rate_limit")

#: Logged once when the primary limiter starts failing, and once when it answers again.
RATE_LIMIT_FALLBACK: Final = "rate-limit-fallback"
RATE_LIMIT_FALLBACK_ENDED: Final = "rate-limit-fallback-ended"


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
        self._outage_fallbacks: int | None = None  # None: the primary answers

    def _primary_failed(self, what: str, exc: RateLimitUnavailable) -> None:
        """One warning per outage: at its first failure (the rest are DEBUG)."""
        if self._outage_fallbacks is None:
            self._outage_fallbacks = 0
            log.warning(
                RATE_LIMIT_FALLBACK,
                extra={
                    "operation": what,
                    "error": str(exc),
                    "fallback": "enabled" if self._enabled else "disabled: calls fail closed",
                },
            )
        else:
            log.debug(RATE_LIMIT_FALLBACK, extra={"operation": what, "error": str(exc)})

    def _primary_answered(self, what: str) -> None:
        if self._outage_fallbacks is not None:
            answered, self._outage_fallbacks = self._outage_fallbacks, None
            log.warning(
                RATE_LIMIT_FALLBACK_ENDED,
                extra={"operation": what, "fallback_calls": answered},
            )

    def _fell_back(self) -> None:
        self.fallbacks += 1
        if self._outage_fallbacks is not None:
            self._outage_fallbacks += 1

    async def _call(
        self,
        what: str,
        primary: Callable[[], Awaitable[T]],
        fallback: Callable[[], Awaitable[T]],
    ) -> T:
        try:
            result = await primary()
        except RateLimitUnavailable as exc:
            self._primary_failed(what, exc)
            if not self._enabled:
                raise
            self._fell_back()
            return await fallback()
        self._primary_answered(what)
        return result

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
            self._primary_answered("refund_rate")

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
        except RateLimitUnavailable as exc:
            self._primary_failed("release", exc)
            if not self._enabled:
                raise
        else:
            self._primary_answered("release")
        if self._enabled:
            await self._fallback.release(reservation)

    async def extend(self, holder: str, *, lease: timedelta, now: datetime | None = None) -> int:
        total = 0
        try:
            total += await self._primary.extend(holder, lease=lease, now=now)
        except RateLimitUnavailable as exc:
            self._primary_failed("extend", exc)
            if not self._enabled:
                raise
        else:
            self._primary_answered("extend")
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
