"""RateLimiter port: rate windows and concurrency reservations per key."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class RatePermit:
    """One call counted in the rate window of ``key`` that starts at ``window_start``.

    What ``refund_rate`` needs to give the permit back to the window it came from.
    """

    key: str
    window: timedelta
    window_start: datetime


@dataclass(frozen=True, slots=True)
class RateDecision:
    """Whether a permit was granted, and if not how long until one may be.

    ``permit`` is the granted permit (None for a denial).
    """

    allowed: bool
    retry_after: timedelta = timedelta(0)
    permit: RatePermit | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    """A held concurrency slot: ``slot`` in ``[0, capacity)`` of ``key``."""

    key: str
    slot: int
    holder: str
    token: str


class RateLimiter(Protocol):
    """Permits per key, correct under concurrency across processes.

    Contract:
    - ``acquire_rate(key, limit, window)``: fixed windows aligned to the epoch
      (``floor(now / window)``); within one window at most ``limit`` calls
      are allowed, however many callers race. A denial carries the time until
      the window ends. A grant carries its :class:`RatePermit`; denied calls
      count nothing.
    - ``refund_rate(permit)`` gives one granted permit back to its own window,
      so one more call is allowed there (never more than ``limit`` in all).
      Nothing goes below zero, and a refund never adds to another window or
      key. Refund each permit at most once: refunds are counted, not matched.
    - ``reserve(key, capacity, holder, lease)``: at most ``capacity``
      unexpired reservations of ``key`` exist at once; returns None when all
      are taken. A reservation expires ``lease`` after it was made or last
      extended, and then frees its slot.
    - ``release`` frees the slot if this reservation still holds it
      (idempotent; a released or expired reservation is a no-op).
    - ``extend(holder, lease)`` pushes the expiry of every live reservation of
      ``holder`` to ``now + lease`` and returns how many it extended.
    - ``sweep_expired()`` deletes expired reservations and returns how many.
    - ``now`` defaults to the limiter's own time source; tests pass it.
    """

    async def acquire_rate(
        self, key: str, *, limit: int, window: timedelta, now: datetime | None = None
    ) -> RateDecision: ...

    async def refund_rate(self, permit: RatePermit) -> None: ...

    async def reserve(
        self,
        key: str,
        *,
        capacity: int,
        holder: str,
        lease: timedelta,
        now: datetime | None = None,
    ) -> Reservation | None: ...

    async def release(self, reservation: Reservation) -> None: ...

    async def extend(
        self, holder: str, *, lease: timedelta, now: datetime | None = None
    ) -> int: ...

    async def sweep_expired(self, *, now: datetime | None = None) -> int: ...

    async def close(self) -> None: ...
