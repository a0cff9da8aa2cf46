"""RateLimiter on Redis: every decision is one atomic server-side script."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from taskq.adapters.redis import scripts
from taskq.domain.errors import RateLimitUnavailable
from taskq.ports.rate_limiter import RateDecision, RatePermit, Reservation

T = TypeVar("T")
Args = list[str | int | float]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _us(value: timedelta) -> int:
    return max(value // timedelta(microseconds=1), 1)


def _now_us(now: datetime | None) -> int:
    # Integer arithmetic: float timestamps lose microseconds this far from the epoch.
    return -1 if now is None else (now - _EPOCH) // timedelta(microseconds=1)


class RedisRateLimiter:
    """Fixed-window rates and leased concurrency slots, keyed under ``prefix``.

    Redis errors surface as ``RateLimitUnavailable`` (raised ``from`` the
    driver error) so a ``FallbackRateLimiter`` can take over. The client is
    closed on ``close()`` only when ``owns_client`` is true.
    """

    def __init__(self, client: Redis, *, prefix: str = "taskq", owns_client: bool = False) -> None:
        self._client = client
        self._prefix = prefix
        self._owns_client = owns_client
        self._acquire = client.register_script(scripts.ACQUIRE_RATE)
        self._refund = client.register_script(scripts.REFUND_RATE)
        self._reserve = client.register_script(scripts.RESERVE)
        self._release = client.register_script(scripts.RELEASE)
        self._extend = client.register_script(scripts.EXTEND)
        self._sweep = client.register_script(scripts.SWEEP)

    def _slots(self, key: str) -> str:
        return f"{self._prefix}:slots:{key}"

    def _holder(self, holder: str) -> str:
        return f"{self._prefix}:holder:{holder}"

    @property
    def _registry(self) -> str:
        return f"{self._prefix}:slot-hashes"

    async def _run(self, call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await call()
        except RedisError as exc:
            raise RateLimitUnavailable(f"redis rate limiter failed: {exc}") from exc
        except OSError as exc:
            raise RateLimitUnavailable(f"redis rate limiter unreachable: {exc}") from exc

    async def acquire_rate(
        self, key: str, *, limit: int, window: timedelta, now: datetime | None = None
    ) -> RateDecision:
        keys = [f"{self._prefix}:rate:{key}"]
        args: Args = [_now_us(now), _us(window), limit]
        raw: Any = await self._run(lambda: self._acquire(keys=keys, args=args))
        allowed, left_us, start_us = int(raw[0]), int(raw[1]), int(raw[2])
        if allowed:
            start = _EPOCH + timedelta(microseconds=start_us)
            return RateDecision(True, permit=RatePermit(key=key, window=window, window_start=start))
        return RateDecision(False, timedelta(microseconds=left_us))

    async def refund_rate(self, permit: RatePermit) -> None:
        keys = [f"{self._prefix}:rate:{permit.key}"]
        args: Args = [_now_us(permit.window_start)]
        await self._run(lambda: self._refund(keys=keys, args=args))

    async def reserve(
        self,
        key: str,
        *,
        capacity: int,
        holder: str,
        lease: timedelta,
        now: datetime | None = None,
    ) -> Reservation | None:
        if capacity <= 0:
            return None
        token = uuid.uuid4().hex
        keys = [self._slots(key), self._holder(holder), self._registry]
        args: Args = [_now_us(now), capacity, holder, token, _us(lease), key]
        slot = int(await self._run(lambda: self._reserve(keys=keys, args=args)))
        if slot < 0:
            return None
        return Reservation(key=key, slot=slot, holder=holder, token=token)

    async def release(self, reservation: Reservation) -> None:
        keys = [self._slots(reservation.key), self._holder(reservation.holder)]
        args: Args = [reservation.slot, reservation.token, reservation.key]
        await self._run(lambda: self._release(keys=keys, args=args))

    async def extend(self, holder: str, *, lease: timedelta, now: datetime | None = None) -> int:
        keys = [self._holder(holder)]
        args: Args = [_now_us(now), _us(lease), f"{self._prefix}:slots:"]
        return int(await self._run(lambda: self._extend(keys=keys, args=args)))

    async def sweep_expired(self, *, now: datetime | None = None) -> int:
        keys = [self._registry]
        return int(await self._run(lambda: self._sweep(keys=keys, args=[_now_us(now)])))

    async def close(self) -> None:
        if self._owns_client:
            await self._client.aclose()
