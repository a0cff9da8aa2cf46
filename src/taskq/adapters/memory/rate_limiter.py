"""MemoryRateLimiter: fixed rate windows and leased concurrency slots in memory.

Window counts live in the backend keyed by ``(key, window length, window
index)``, so limiters on one backend share them like processes sharing
Redis. Every call is atomic (no await after its first yield).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from taskq.adapters.memory.rows import ReservationRow
from taskq.domain.errors import RateLimitUnavailable
from taskq.ports.rate_limiter import RateDecision, RatePermit, Reservation

if TYPE_CHECKING:
    from taskq.adapters.memory.backend import MemoryBackend
    from taskq.ports.rate_limiter import RateLimiter

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US: Final = timedelta(microseconds=1)


class MemoryRateLimiter:
    """See the ``RateLimiter`` port. Raises ``RateLimitUnavailable`` when closed or unreachable."""

    def __init__(self, backend: MemoryBackend) -> None:
        self._db = backend
        self._closed = False

    def __repr__(self) -> str:
        return f"<MemoryRateLimiter closed={self._closed}>"

    async def acquire_rate(
        self, key: str, *, limit: int, window: timedelta, now: datetime | None = None
    ) -> RateDecision:
        at = await self._begin(now)
        if window <= timedelta(0):
            raise ValueError(f"window must be > 0, got {window}")
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        length = window // _ONE_US
        elapsed = (at - _EPOCH) // _ONE_US
        index = elapsed // length
        windows = self._db.rate_windows
        # Windows of this key that have ended can never matter again.
        for stale in [k for k in windows if k[0] == key and k[1] == length and k[2] < index]:
            del windows[stale]
        slot = (key, length, index)
        granted = windows.get(slot, 0)
        if granted < limit:
            windows[slot] = granted + 1
            start = _EPOCH + index * length * _ONE_US
            return RateDecision(
                allowed=True, permit=RatePermit(key=key, window=window, window_start=start)
            )
        return RateDecision(
            allowed=False, retry_after=timedelta(microseconds=(index + 1) * length - elapsed)
        )

    async def refund_rate(self, permit: RatePermit) -> None:
        await self._begin(None)
        length = permit.window // _ONE_US
        slot = (permit.key, length, ((permit.window_start - _EPOCH) // _ONE_US) // length)
        granted = self._db.rate_windows.get(slot, 0)
        if granted > 0:
            self._db.rate_windows[slot] = granted - 1

    async def reserve(
        self,
        key: str,
        *,
        capacity: int,
        holder: str,
        lease: timedelta,
        now: datetime | None = None,
    ) -> Reservation | None:
        at = await self._begin(now)
        if lease <= timedelta(0):
            raise ValueError(f"lease must be > 0, got {lease}")
        taken = {
            slot
            for (k, slot), row in self._db.reservations.items()
            if k == key and row.expires_at > at
        }
        free = next((s for s in range(capacity) if s not in taken), None)
        if free is None:
            return None
        row = ReservationRow(
            key=key,
            slot=free,
            holder=holder,
            token=self._db.next_reservation_token(),
            expires_at=at + lease,
        )
        # Replaces an expired reservation of the same slot, if one is left.
        self._db.reservations[(key, free)] = row
        return Reservation(key=key, slot=free, holder=holder, token=row.token)

    async def release(self, reservation: Reservation) -> None:
        await self._begin(None)
        slot = (reservation.key, reservation.slot)
        row = self._db.reservations.get(slot)
        if row is not None and row.token == reservation.token:
            del self._db.reservations[slot]

    async def extend(self, holder: str, *, lease: timedelta, now: datetime | None = None) -> int:
        at = await self._begin(now)
        if lease <= timedelta(0):
            raise ValueError(f"lease must be > 0, got {lease}")
        extended = 0
        for row in self._db.reservations.values():
            if row.holder == holder and row.expires_at > at:
                row.expires_at = at + lease
                extended += 1
        return extended

    async def sweep_expired(self, *, now: datetime | None = None) -> int:
        at = await self._begin(now)
        expired = [slot for slot, row in self._db.reservations.items() if row.expires_at <= at]
        for slot in expired:
            del self._db.reservations[slot]
        return len(expired)

    async def close(self) -> None:
        self._closed = True

    async def _begin(self, now: datetime | None) -> datetime:
        await asyncio.sleep(0)
        if self._closed:
            raise RateLimitUnavailable("rate limiter is closed")
        if not self._db.reachable:
            raise RateLimitUnavailable("memory backend is unreachable (set_reachable(False))")
        if now is None:
            return self._db.clock.now()
        if now.tzinfo is None:
            raise ValueError(f"now must be timezone-aware, got {now!r}")
        return now


if TYPE_CHECKING:

    def _conforms(backend: MemoryBackend) -> RateLimiter:
        return MemoryRateLimiter(backend)


__all__ = ["MemoryRateLimiter"]
