"""The RateLimiter port on Postgres, written once for both drivers.

State lives in ``rate_limit_windows`` (fixed windows aligned to the epoch:
``floor(now / window)``, the same arithmetic as the Redis and memory
limiters) and ``reservation_slots`` (leased slots in ``[0, capacity)``). Every
decision is one statement of ``queries/rate_limits.sql``, so limiters on any
number of connections and processes agree. ``now=None`` means the database
clock, so processes with skewed clocks still share windows and expiries.

A driver subclass only runs one named query on a pooled connection and names
its failures; each becomes ``RateLimitUnavailable`` (raised ``from`` the
original), which is what lets ``FallbackRateLimiter`` put Postgres behind
Redis. The pool is the caller's: ``close()`` never closes it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Final, Literal

from taskq.adapters.postgres.schema import Schema
from taskq.domain.errors import RateLimitUnavailable
from taskq.ports.rate_limiter import RateDecision, RatePermit, Reservation

#: The query file this limiter runs.
QUERY_FAMILY: Final = "rate_limits"
#: Seconds one limiter call (pool wait included) may take before it counts as unavailable.
OPERATION_TIMEOUT: Final = 10.0
#: Upserts one ``reserve`` tries. Each lost race means another caller won a slot, so a
#: caller runs out only under a crowd larger than this; it is then refused, never admitted.
RESERVE_ATTEMPTS: Final = 10
#: The ``count`` column is a Postgres integer.
MAX_LIMIT: Final = 2**31 - 1

RateQuery = Literal[
    "acquire_rate",
    "refund_rate",
    "reserve_slot",
    "release_slot",
    "extend_holder",
    "sweep_expired",
]

_ONE_US: Final = timedelta(microseconds=1)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

log = logging.getLogger("taskq.rate_limit")


def micros(value: timedelta) -> int:
    """``value`` in whole microseconds (the resolution Postgres timestamps keep)."""
    return value // _ONE_US


def check_now(now: datetime | None) -> None:
    """Refuse a naive ``now``: it would be read in the session's time zone."""
    if now is not None and now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware, got {now!r}")


def check_rate(limit: int, window: timedelta) -> None:
    if window <= timedelta(0):
        raise ValueError(f"window must be > 0, got {window}")
    if not 0 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be in [0, {MAX_LIMIT}], got {limit}")


def check_lease(lease: timedelta) -> None:
    if lease <= timedelta(0):
        raise ValueError(f"lease must be > 0, got {lease}")


class PostgresRateLimiter(ABC):
    """Fixed-window rates and leased concurrency slots; see the ``RateLimiter`` port."""

    #: The driver's errors (and OS errors) that mean the call failed: ``RateLimitUnavailable``.
    connection_failures: ClassVar[tuple[type[Exception], ...]] = (OSError,)

    def __init__(self, *, schema: Schema) -> None:
        self.schema = schema
        self._closed = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} schema={self.schema.name!r} closed={self._closed}>"

    @abstractmethod
    async def _fetch_one(
        self, query: RateQuery, params: Mapping[str, object]
    ) -> Mapping[str, Any] | None:
        """Run ``query`` on a pooled connection and return its first row, if any."""

    async def _fetchrow(self, query: RateQuery, params: Mapping[str, object]) -> Mapping[str, Any]:
        """Run ``query`` on a pooled connection and return its one row.

        Raises ``RateLimitUnavailable`` (``from`` the driver error) on any
        failure, a timeout after :data:`OPERATION_TIMEOUT` included.
        """
        try:
            async with asyncio.timeout(OPERATION_TIMEOUT):
                row = await self._fetch_one(query, params)
        except self.connection_failures as exc:
            raise RateLimitUnavailable(f"postgres rate limiter failed: {exc!r}") from exc
        if row is None:  # every rate_limits query returns exactly one row
            raise RateLimitUnavailable(f"postgres rate limiter: {query} returned no row")
        return row

    async def acquire_rate(
        self, key: str, *, limit: int, window: timedelta, now: datetime | None = None
    ) -> RateDecision:
        self._check_open()
        check_rate(limit, window)
        check_now(now)
        row = await self._fetchrow(
            "acquire_rate", {"key": key, "limit": limit, "window_us": micros(window), "now": now}
        )
        if row["allowed"]:
            start = _EPOCH + int(row["window_start_us"]) * _ONE_US
            return RateDecision(
                allowed=True, permit=RatePermit(key=key, window=window, window_start=start)
            )
        return RateDecision(allowed=False, retry_after=int(row["retry_after_us"]) * _ONE_US)

    async def refund_rate(self, permit: RatePermit) -> None:
        self._check_open()
        start_us = micros(permit.window_start - _EPOCH)
        await self._fetchrow("refund_rate", {"key": permit.key, "window_start_us": start_us})

    async def reserve(
        self,
        key: str,
        *,
        capacity: int,
        holder: str,
        lease: timedelta,
        now: datetime | None = None,
    ) -> Reservation | None:
        self._check_open()
        check_lease(lease)
        check_now(now)
        if capacity <= 0:
            return None
        token = uuid.uuid4().hex
        params: dict[str, object] = {
            "key": key,
            "capacity": capacity,
            "holder": holder,
            "token": token,
            "lease_us": micros(lease),
            "now": now,
        }
        for attempt in range(RESERVE_ATTEMPTS):
            # The first try takes the lowest free slot; after a lost race, racers spread out.
            row = await self._fetchrow("reserve_slot", {**params, "spread": attempt > 0})
            if row["slot"] is not None:
                return Reservation(key=key, slot=int(row["slot"]), holder=holder, token=token)
            if not row["had_free"]:
                return None
        log.warning(
            "rate-limit-reserve-contended", extra={"key": key, "attempts": RESERVE_ATTEMPTS}
        )
        return None

    async def release(self, reservation: Reservation) -> None:
        self._check_open()
        await self._fetchrow(
            "release_slot",
            {"key": reservation.key, "slot": reservation.slot, "token": reservation.token},
        )

    async def extend(self, holder: str, *, lease: timedelta, now: datetime | None = None) -> int:
        self._check_open()
        check_lease(lease)
        check_now(now)
        row = await self._fetchrow(
            "extend_holder", {"holder": holder, "lease_us": micros(lease), "now": now}
        )
        return int(row["extended"])

    async def sweep_expired(self, *, now: datetime | None = None) -> int:
        self._check_open()
        check_now(now)
        row = await self._fetchrow("sweep_expired", {"now": now})
        return int(row["swept"])

    async def close(self) -> None:
        """Stop answering (calls then raise ``RateLimitUnavailable``); the pool stays open."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RateLimitUnavailable("rate limiter is closed")


__all__ = [
    "MAX_LIMIT",
    "OPERATION_TIMEOUT",
    "QUERY_FAMILY",
    "RESERVE_ATTEMPTS",
    "PostgresRateLimiter",
    "RateQuery",
    "check_lease",
    "check_now",
    "check_rate",
    "micros",
]
