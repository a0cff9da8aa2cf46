"""ActorLimits on the memory limiter and a fake clock: admit, deny, release, roll back.

Also the startup refusal of limited actors on a worker without a rate limiter.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from tests.unit.app.worker.harness import events_named, fields, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore, MemoryRateLimiter
from taskq.app.actors import actor
from taskq.app.worker import Worker, WorkerPorts, events
from taskq.app.worker.limits import (
    LIMITER_UNAVAILABLE_DELAY,
    NO_LIMITS,
    RESERVATION_RETRY_DELAY,
    RETRY_JITTER,
    ActorLimits,
    Admitted,
    Denied,
)
from taskq.app.worker.startup import require_rate_limiter
from taskq.domain.errors import ConfigurationError, PayloadValidationError, RateLimitUnavailable
from taskq.domain.limits import ConcurrencyLimit, RateLimit
from taskq.ports.rate_limiter import RateDecision, RateLimiter, RatePermit, Reservation

MINUTE = timedelta(minutes=1)
LEASE = timedelta(seconds=30)


class Call(BaseModel):
    tenant: str = "acme"


@actor
async def plain(payload: Call) -> None: ...


@actor(rate_limits=[RateLimit("api", limit=2, per=MINUTE)])
async def rated(payload: Call) -> None: ...


@actor(rate_limits=[RateLimit("api", limit=2, per=MINUTE)])
async def rated_too(payload: Call) -> None: ...


@actor(reservations=[ConcurrencyLimit("db", capacity=1)])
async def pooled(payload: Call) -> None: ...


@actor(reservations=[ConcurrencyLimit("a", capacity=1), ConcurrencyLimit("b", capacity=1)])
async def two_slots(payload: Call) -> None: ...


@actor(
    reservations=[ConcurrencyLimit("db", capacity=1)],
    rate_limits=[RateLimit("api", limit=1, per=MINUTE)],
)
async def both(payload: Call) -> None: ...


@actor(
    reservations=[ConcurrencyLimit("db", capacity=1)],
    rate_limits=[RateLimit("a", limit=1, per=MINUTE), RateLimit("b", limit=1, per=MINUTE)],
)
async def two_rates(payload: Call) -> None: ...


@actor(
    reservations=[ConcurrencyLimit(lambda p: f"tenant:{p.tenant}", capacity=1)],
    rate_limits=[RateLimit("per-tenant:{tenant}", limit=1, per=MINUTE)],
)
async def per_tenant(payload: Call) -> None: ...


@actor(
    reservations=[
        ConcurrencyLimit(lambda p: f"t:{p.tenant}", capacity=1),
        ConcurrencyLimit("t:{tenant}", capacity=3),
    ]
)
async def overlapping(payload: Call) -> None: ...


@actor(reservations=[ConcurrencyLimit(lambda p: p.tenant.split("/")[1], capacity=1)])
async def fragile_key(payload: Call) -> None: ...


def upper(a: float, b: float) -> float:
    """A ``uniform`` that always picks the top of the range (the longest jitter)."""
    return b


class Flaky:
    """A real memory limiter whose named methods fail as an unreachable backend would."""

    def __init__(self, inner: RateLimiter, *, fail: set[str]) -> None:
        self.inner = inner
        self.fail = fail

    def _check(self, method: str) -> None:
        if method in self.fail:
            raise RateLimitUnavailable(f"{method}: backend unreachable")

    async def acquire_rate(
        self, key: str, *, limit: int, window: timedelta, now: datetime | None = None
    ) -> RateDecision:
        self._check("acquire_rate")
        return await self.inner.acquire_rate(key, limit=limit, window=window, now=now)

    async def refund_rate(self, permit: RatePermit) -> None:
        self._check("refund_rate")
        await self.inner.refund_rate(permit)

    async def reserve(
        self,
        key: str,
        *,
        capacity: int,
        holder: str,
        lease: timedelta,
        now: datetime | None = None,
    ) -> Reservation | None:
        self._check("reserve")
        return await self.inner.reserve(key, capacity=capacity, holder=holder, lease=lease, now=now)

    async def release(self, reservation: Reservation) -> None:
        self._check("release")
        await self.inner.release(reservation)

    async def extend(self, holder: str, *, lease: timedelta, now: datetime | None = None) -> int:
        return await self.inner.extend(holder, lease=lease, now=now)

    async def sweep_expired(self, *, now: datetime | None = None) -> int:
        return await self.inner.sweep_expired(now=now)

    async def close(self) -> None:
        await self.inner.close()


@pytest.fixture
def limiter(backend: MemoryBackend) -> MemoryRateLimiter:
    return backend.rate_limiter()


@pytest.fixture
def limits(limiter: MemoryRateLimiter) -> ActorLimits:
    return ActorLimits(limiter, holder="w1", lease=LEASE, rng=upper)


def admitted(result: Admitted | Denied) -> Admitted:
    assert isinstance(result, Admitted), result
    return result


def denied(result: Admitted | Denied) -> Denied:
    assert isinstance(result, Denied), result
    return result


async def slot_is_free(limiter: RateLimiter, key: str) -> bool:
    """Whether another worker could take the (capacity 1) slot of ``key`` now; gives it back."""
    probe = await limiter.reserve(key, capacity=1, holder="probe", lease=LEASE)
    if probe is None:
        return False
    await limiter.release(probe)
    return True


async def permit_is_free(limiter: RateLimiter, key: str) -> bool:
    """Whether a (limit 1 per minute) permit of ``key`` is still unspent now; gives it back."""
    probe = await limiter.acquire_rate(key, limit=1, window=MINUTE)
    if probe.permit is not None:
        await limiter.refund_rate(probe.permit)
    return probe.allowed


# -- no limits -------------------------------------------------------------------------


async def test_an_actor_without_limits_is_admitted_without_a_limiter() -> None:
    """No declared limits: admitted with nothing held, even when the worker has no limiter."""
    limits = ActorLimits(None, holder="w1", lease=LEASE)
    result = await limits.acquire(plain, Call())
    assert result is NO_LIMITS
    await limits.release(NO_LIMITS)


async def test_a_limited_actor_without_a_limiter_is_a_wiring_error() -> None:
    """Reaching acquire with limits and no limiter (startup refuses that) names the actor."""
    limits = ActorLimits(None, holder="w1", lease=LEASE)
    with pytest.raises(ConfigurationError, match=r"'rated'.*no rate limiter"):
        await limits.acquire(rated, Call())


def test_the_lease_must_be_positive(limiter: MemoryRateLimiter) -> None:
    """A reservation lease of zero would expire at once."""
    with pytest.raises(ValueError, match="lease must be > 0"):
        ActorLimits(limiter, holder="w1", lease=timedelta(0))


# -- rate limits -----------------------------------------------------------------------


async def test_rate_limit_denies_until_the_window_ends(
    limits: ActorLimits, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """limit=2 per minute: the third start is denied until the window ends, then admitted."""
    clock.advance(15)  # windows are aligned to the epoch: 45 s of this one are left
    assert admitted(await limits.acquire(rated, Call())).reservations == ()
    admitted(await limits.acquire(rated, Call()))
    third = denied(await limits.acquire(rated, Call(), job_id=7))
    assert third == Denied(timedelta(seconds=45), "rate-limited", "rate:60s:api")
    [record] = events_named(caplog, events.DISPATCH_RATE_LIMITED)
    assert fields(record) == {
        "actor": "rated",
        "job_id": 7,
        "key": "rate:60s:api",
        "retry_after_seconds": 45.0,
    }
    clock.advance(45)
    admitted(await limits.acquire(rated, Call()))


async def test_actors_declaring_one_key_share_its_budget(limits: ActorLimits) -> None:
    """Two actors with the same key and window draw on one count."""
    at = datetime.fromisoformat("2030-01-01T00:00:00+00:00")
    admitted(await limits.acquire(rated, Call(), now=at))
    admitted(await limits.acquire(rated_too, Call(), now=at))
    assert denied(await limits.acquire(rated, Call(), now=at)).reason == "rate-limited"
    assert denied(await limits.acquire(rated_too, Call(), now=at)).reason == "rate-limited"


# -- reservations ----------------------------------------------------------------------


async def test_reservation_is_held_until_released(
    limits: ActorLimits, caplog: pytest.LogCaptureFixture
) -> None:
    """capacity=1: a second job is denied (~1 s, jittered) until the first releases its slot."""
    first = admitted(await limits.acquire(pooled, Call()))
    [reservation] = first.reservations
    assert (reservation.key, reservation.slot, reservation.holder) == ("reservation:db", 0, "w1")
    second = denied(await limits.acquire(pooled, Call(), job_id=9))
    assert second == Denied(
        RESERVATION_RETRY_DELAY * (1 + RETRY_JITTER), "reservation-unavailable", "reservation:db"
    )
    [record] = events_named(caplog, events.DISPATCH_RESERVATION_UNAVAILABLE)
    assert fields(record)["key"] == "reservation:db"
    await limits.release(first)
    await limits.release(first)  # idempotent
    admitted(await limits.acquire(pooled, Call()))


async def test_reservation_retry_delay_is_jittered(limiter: MemoryRateLimiter) -> None:
    """The reservation snooze is spread over [1 - j, 1 + j] times the base delay."""
    low = ActorLimits(limiter, holder="w1", lease=LEASE, rng=lambda a, b: a)
    admitted(await low.acquire(pooled, Call()))
    result = denied(await low.acquire(pooled, Call()))
    assert result.retry_after == RESERVATION_RETRY_DELAY * (1 - RETRY_JITTER)


async def test_reservations_are_held_across_workers(limiter: MemoryRateLimiter) -> None:
    """A slot held by one worker denies another worker's job (capacity is cluster-wide)."""
    mine = ActorLimits(limiter, holder="w1", lease=LEASE)
    theirs = ActorLimits(limiter, holder="w2", lease=LEASE)
    held = admitted(await mine.acquire(pooled, Call()))
    assert denied(await theirs.acquire(pooled, Call())).reason == "reservation-unavailable"
    await mine.release(held)
    assert admitted(await theirs.acquire(pooled, Call())).reservations[0].holder == "w2"


async def test_an_unreleased_reservation_expires_with_its_lease(
    limits: ActorLimits, clock: FakeClock
) -> None:
    """A slot never released (a dead worker) frees itself when its lease ends."""
    admitted(await limits.acquire(pooled, Call()))
    clock.advance(LEASE.total_seconds() - 1)
    assert denied(await limits.acquire(pooled, Call())).reason == "reservation-unavailable"
    clock.advance(1)
    admitted(await limits.acquire(pooled, Call()))


# -- partial acquires ------------------------------------------------------------------


async def test_a_denied_second_reservation_releases_the_first(
    limits: ActorLimits, limiter: MemoryRateLimiter
) -> None:
    """Slot 'a' taken, slot 'b' busy elsewhere: the job is denied and 'a' is free again."""
    other = await limiter.reserve("reservation:b", capacity=1, holder="w2", lease=LEASE)
    assert other is not None
    result = denied(await limits.acquire(two_slots, Call()))
    assert (result.reason, result.key) == ("reservation-unavailable", "reservation:b")
    assert await slot_is_free(limiter, "reservation:a")


async def test_rate_denial_after_reservation_frees_the_slot(
    limits: ActorLimits, limiter: MemoryRateLimiter
) -> None:
    """Permit spent elsewhere: a job of `both` takes 'db', is rate-denied, and gives it back."""
    assert (await limiter.acquire_rate("rate:60s:api", limit=1, window=MINUTE)).allowed
    result = denied(await limits.acquire(both, Call()))
    assert (result.reason, result.key) == ("rate-limited", "rate:60s:api")
    assert await slot_is_free(limiter, "reservation:db")


async def test_a_reservation_denial_spends_no_rate_permit(
    limits: ActorLimits, limiter: MemoryRateLimiter
) -> None:
    """Reservations are taken before permits, so a job denied a slot leaves the permit unused."""
    other = await limiter.reserve("reservation:db", capacity=1, holder="w2", lease=LEASE)
    assert other is not None
    assert denied(await limits.acquire(both, Call())).reason == "reservation-unavailable"
    await limiter.release(other)
    assert len(admitted(await limits.acquire(both, Call())).reservations) == 1


async def test_a_cancelled_acquire_releases_what_it_took(
    backend: MemoryBackend, limiter: MemoryRateLimiter
) -> None:
    """A job cancelled while waiting for the limiter gives back the slots it already held."""
    gate = asyncio.Event()
    entered = asyncio.Event()

    class Slow(Flaky):
        async def acquire_rate(
            self, key: str, *, limit: int, window: timedelta, now: datetime | None = None
        ) -> RateDecision:
            entered.set()
            await gate.wait()
            return await super().acquire_rate(key, limit=limit, window=window, now=now)

    limits = ActorLimits(Slow(limiter, fail=set()), holder="w1", lease=LEASE)
    task = asyncio.create_task(limits.acquire(both, Call()))
    await entered.wait()
    assert not await slot_is_free(limiter, "reservation:db")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await slot_is_free(limiter, "reservation:db")


async def test_a_rate_denial_refunds_the_permits_already_granted(
    limits: ActorLimits, limiter: MemoryRateLimiter
) -> None:
    """Key 'a' grants, key 'b' (spent elsewhere) denies: the 'a' permit and the slot come back."""
    assert (await limiter.acquire_rate("rate:60s:b", limit=1, window=MINUTE)).allowed
    result = denied(await limits.acquire(two_rates, Call()))
    assert (result.reason, result.key) == ("rate-limited", "rate:60s:b")
    assert await permit_is_free(limiter, "rate:60s:a")
    assert await slot_is_free(limiter, "reservation:db")


async def test_a_limiter_failure_on_a_later_key_refunds_the_earlier_permits(
    limiter: MemoryRateLimiter,
) -> None:
    """Key 'a' grants, then the limiter fails on 'b': denied, and nothing stays taken."""

    class FailsOnB(Flaky):
        async def acquire_rate(
            self, key: str, *, limit: int, window: timedelta, now: datetime | None = None
        ) -> RateDecision:
            if key == "rate:60s:b":
                raise RateLimitUnavailable("b: backend unreachable")
            return await super().acquire_rate(key, limit=limit, window=window, now=now)

    limits = ActorLimits(FailsOnB(limiter, fail=set()), holder="w1", lease=LEASE)
    result = denied(await limits.acquire(two_rates, Call()))
    assert (result.reason, result.key) == ("rate-limiter-unavailable", "rate:60s:b")
    assert await permit_is_free(limiter, "rate:60s:a")
    assert await slot_is_free(limiter, "reservation:db")


async def test_a_cancelled_acquire_refunds_its_permits(limiter: MemoryRateLimiter) -> None:
    """Cancelled while waiting on key 'b': the permit of 'a' and the slot are given back."""
    gate = asyncio.Event()
    entered = asyncio.Event()

    class SlowOnB(Flaky):
        async def acquire_rate(
            self, key: str, *, limit: int, window: timedelta, now: datetime | None = None
        ) -> RateDecision:
            if key == "rate:60s:b":
                entered.set()
                await gate.wait()
            return await super().acquire_rate(key, limit=limit, window=window, now=now)

    limits = ActorLimits(SlowOnB(limiter, fail=set()), holder="w1", lease=LEASE)
    task = asyncio.create_task(limits.acquire(two_rates, Call()))
    await entered.wait()
    assert not await permit_is_free(limiter, "rate:60s:a")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await permit_is_free(limiter, "rate:60s:a")
    assert await slot_is_free(limiter, "reservation:db")


async def test_refund_failures_are_logged_not_raised(
    limiter: MemoryRateLimiter, caplog: pytest.LogCaptureFixture
) -> None:
    """A refund that fails logs rate-limit-refund-failed; the job is still just denied."""
    assert (await limiter.acquire_rate("rate:60s:b", limit=1, window=MINUTE)).allowed
    limits = ActorLimits(Flaky(limiter, fail={"refund_rate"}), holder="w1", lease=LEASE)
    result = denied(await limits.acquire(two_rates, Call(), job_id=4))
    assert result.reason == "rate-limited"
    [record] = events_named(caplog, events.RATE_LIMIT_REFUND_FAILED)
    assert record.levelno == logging.WARNING
    assert (fields(record)["key"], fields(record)["job_id"]) == ("rate:60s:a", 4)
    assert not await permit_is_free(limiter, "rate:60s:a")
    assert await slot_is_free(limiter, "reservation:db")


# -- keys ------------------------------------------------------------------------------


async def test_callable_and_template_keys_limit_per_tenant(limits: ActorLimits) -> None:
    """Per-tenant keys: each tenant has its own slot and its own rate budget."""
    acme = admitted(await limits.acquire(per_tenant, Call(tenant="acme")))
    assert [r.key for r in acme.reservations] == ["reservation:tenant:acme"]
    admitted(await limits.acquire(per_tenant, Call(tenant="globex")))
    result = denied(await limits.acquire(per_tenant, Call(tenant="acme")))
    assert result.key == "reservation:tenant:acme"
    await limits.release(acme)
    result = denied(await limits.acquire(per_tenant, Call(tenant="acme")))
    assert (result.reason, result.key) == ("rate-limited", "rate:60s:per-tenant:acme")


async def test_declarations_resolving_to_one_key_are_taken_once(limits: ActorLimits) -> None:
    """Two reservations resolving alike hold one slot, at the smaller capacity (never deadlock)."""
    first = admitted(await limits.acquire(overlapping, Call()))
    assert [r.key for r in first.reservations] == ["reservation:t:acme"]
    assert denied(await limits.acquire(overlapping, Call())).reason == "reservation-unavailable"


async def test_a_key_that_fails_for_the_payload_is_a_payload_error(
    limits: ActorLimits, limiter: MemoryRateLimiter
) -> None:
    """A key callable that fails for this payload raises PayloadValidationError, takes nothing."""
    with pytest.raises(PayloadValidationError, match="IndexError"):
        await limits.acquire(fragile_key, Call(tenant="no-slash"))
    admitted(await limits.acquire(fragile_key, Call(tenant="org/acme")))


# -- limiter failures ------------------------------------------------------------------


async def test_an_unreachable_limiter_denies_and_logs(
    backend: MemoryBackend, limits: ActorLimits, caplog: pytest.LogCaptureFixture
) -> None:
    """A limiter error is a denial (~5 s, jittered) with a warning, never a run or a failure."""
    backend.set_reachable(False)
    result = denied(await limits.acquire(rated, Call(), job_id=3))
    assert result == Denied(
        LIMITER_UNAVAILABLE_DELAY * (1 + RETRY_JITTER), "rate-limiter-unavailable", "rate:60s:api"
    )
    [record] = events_named(caplog, events.DISPATCH_RATE_LIMITER_UNAVAILABLE)
    assert record.levelno == logging.WARNING
    assert fields(record)["job_id"] == 3
    assert "unreachable" in fields(record)["error"]
    backend.set_reachable(True)
    admitted(await limits.acquire(rated, Call()))


async def test_a_limiter_failure_after_a_reservation_releases_it(
    limiter: MemoryRateLimiter,
) -> None:
    """Reserved, then the rate check fails: denied, and the slot is given back."""
    limits = ActorLimits(Flaky(limiter, fail={"acquire_rate"}), holder="w1", lease=LEASE)
    result = denied(await limits.acquire(both, Call()))
    assert (result.reason, result.key) == ("rate-limiter-unavailable", "rate:60s:api")
    assert await slot_is_free(limiter, "reservation:db")


async def test_release_failures_are_logged_not_raised(
    limiter: MemoryRateLimiter, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A failed release logs rate-limit-release-failed and leaves the slot to its lease."""
    flaky = Flaky(limiter, fail=set())
    limits = ActorLimits(flaky, holder="w1", lease=LEASE)
    held = admitted(await limits.acquire(two_slots, Call()))
    flaky.fail.add("release")
    await limits.release(held, job_id=5)
    records = events_named(caplog, events.RATE_LIMIT_RELEASE_FAILED)
    assert [fields(r)["key"] for r in records] == ["reservation:a", "reservation:b"]
    assert {fields(r)["job_id"] for r in records} == {5}
    assert all(r.levelno == logging.WARNING for r in records)
    assert not await slot_is_free(limiter, "reservation:a")
    clock.advance(LEASE.total_seconds())
    assert await slot_is_free(limiter, "reservation:a")


# -- startup ---------------------------------------------------------------------------


def test_require_rate_limiter_names_the_limited_actors(limiter: MemoryRateLimiter) -> None:
    """Without a limiter, every actor that declares limits is named; otherwise it passes."""
    registry: dict[str, Any] = {"plain": plain, "rated": rated, "pooled": pooled}
    with pytest.raises(ConfigurationError, match="actors 'pooled', 'rated' declare"):
        require_rate_limiter(registry, None)
    with pytest.raises(ConfigurationError, match="actor 'rated' declares"):
        require_rate_limiter({"rated": rated}, None)
    require_rate_limiter(registry, limiter)
    require_rate_limiter({"plain": plain}, None)


async def test_a_worker_without_a_limiter_refuses_limited_actors(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """Limited actors and no rate limiter: the worker exits 1 naming them, never registered."""
    ports = WorkerPorts(store=backend.store(), leader_lock=backend.leader_lock(), clock=clock)
    worker = Worker(
        make_settings(), {"plain": plain, "rated": rated}, ports, hard_trip=False, loop_lag=False
    )
    assert await worker.run() == 1
    assert worker.problem is not None
    assert "'rated'" in worker.problem
    assert "'plain'" not in worker.problem
    assert await client.list_workers() == []
