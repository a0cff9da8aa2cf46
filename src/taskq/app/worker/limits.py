"""Rate limits and reservations at dispatch: acquire before the actor runs, release after.

For one job of an actor that declares limits (the worker guide's dispatch
sequence, between ``JobContext`` construction and invocation)::

    resolve every declared key for the payload     cannot → PayloadValidationError
    reserve each distinct reservation key          none free → release the taken ones,
                                                     Denied(~1 s, reservation-unavailable)
    take a permit for each distinct rate key       denied → refund the permits taken,
                                                     release the reservations,
                                                     Denied(window end, rate-limited)
    limiter error at any step                      refund and release what was taken,
                                                     Denied(~5 s, rate-limiter-unavailable)
    ... the actor runs ...
    release every reservation                      best effort; the lease is the backstop

A denied job consumes nothing: a permit granted on one rate key before
another key denied the job is refunded to its window, and every reservation
taken is released (best effort: a failed refund is logged and that permit
stays spent until its window ends). Reservations are taken before rate
permits so that a job denied a slot never touches a rate window at all.
Keys are taken in sorted order, so every worker
asks for them in the same order, and keys two declarations resolve to alike
are taken once, at the smaller limit or capacity. Reservations are held by
the worker (``holder``) for ``lease``; the heartbeat extends them while the
worker lives and the leader sweeps them once a dead worker's lease ends.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from taskq.app.worker import events
from taskq.app.worker.protocols import ActorLike
from taskq.domain.errors import ConfigurationError, TaskQError
from taskq.domain.retry import Uniform
from taskq.ports.rate_limiter import RateLimiter, RatePermit, Reservation

#: Snooze of a job that found every slot of a reservation key taken: slots
#: free when jobs end, which the worker cannot predict, so it looks again soon.
RESERVATION_RETRY_DELAY: Final = timedelta(seconds=1)
#: Snooze of a job whose limits could not be checked because the limiter failed.
LIMITER_UNAVAILABLE_DELAY: Final = timedelta(seconds=5)
#: The two delays above are spread by ``uniform(1 - j, 1 + j)`` so jobs denied
#: together do not all come back at the same instant.
RETRY_JITTER: Final = 0.5
#: Floor of a rate denial's snooze, so a window that ends "now" cannot spin a job.
MIN_RATE_RETRY: Final = timedelta(milliseconds=10)

DenialReason = Literal["rate-limited", "reservation-unavailable", "rate-limiter-unavailable"]


@dataclass(frozen=True, slots=True)
class Admitted:
    """The job may run; it holds ``reservations`` until :meth:`ActorLimits.release`."""

    reservations: tuple[Reservation, ...] = ()
    actor: str = ""


@dataclass(frozen=True, slots=True)
class Denied:
    """The job may not run now: snooze it for ``retry_after`` (no attempt used).

    ``key`` is the namespaced limiter key that denied it.
    """

    retry_after: timedelta
    reason: DenialReason
    key: str


#: What an actor without limits is admitted with (nothing to release).
NO_LIMITS: Final = Admitted()


def declares_limits(ref: ActorLike) -> bool:
    """True when ``ref`` declares any rate limit or reservation."""
    return bool(ref.rate_limits or ref.reservations)


def _plan(
    ref: ActorLike, payload: Any
) -> tuple[list[tuple[str, int]], list[tuple[str, int, timedelta]]]:
    """(reservation key, capacity) and (rate key, limit, window) to take, deduplicated, sorted."""
    slots: dict[str, int] = {}
    for slot in ref.reservations:
        key = slot.key_for(payload)
        slots[key] = min(slots.get(key, slot.capacity), slot.capacity)
    rates: dict[str, tuple[int, timedelta]] = {}
    for rate in ref.rate_limits:
        key = rate.key_for(payload)  # carries the window length: equal keys, equal windows
        limit = min(rates[key][0], rate.limit) if key in rates else rate.limit
        rates[key] = (limit, rate.per)
    return sorted(slots.items()), [(k, lim, per) for k, (lim, per) in sorted(rates.items())]


class ActorLimits:
    """Takes and gives back one worker's rate permits and reservations.

    ``limiter`` may be None only when no actor declares limits (the startup
    check :func:`taskq.app.worker.startup.require_rate_limiter` refuses the
    rest). ``rng`` spreads the retry delays (``random.uniform``-like).
    """

    def __init__(
        self,
        limiter: RateLimiter | None,
        *,
        holder: str,
        lease: timedelta,
        rng: Uniform = random.uniform,
    ) -> None:
        if lease <= timedelta(0):
            raise ValueError(f"reservation lease must be > 0, got {lease}")
        self.limiter = limiter
        self.holder = holder
        self.lease = lease
        self._rng = rng

    def __repr__(self) -> str:
        return f"<ActorLimits holder={self.holder!r} lease={self.lease} limiter={self.limiter!r}>"

    async def acquire(
        self,
        ref: ActorLike,
        payload: Any,
        *,
        now: datetime | None = None,
        job_id: int | None = None,
    ) -> Admitted | Denied:
        """Admit a job of ``ref`` with validated ``payload``, or say how long to snooze it.

        ``now`` defaults to the limiter's own clock (the database's, for the
        Postgres limiter, the one the heartbeat's ``extend`` uses too); tests
        pass it. A denial takes nothing: permits granted before it are
        refunded and reservations released. Raises ``PayloadValidationError`` when a key cannot be
        resolved for this payload (never retried); limiter failures are
        denials, not errors.
        """
        if not declares_limits(ref):
            return NO_LIMITS
        limiter = self._require(ref)
        slots, rates = _plan(ref, payload)
        held: list[Reservation] = []
        permits: list[RatePermit] = []
        key = ""
        try:
            denied: Denied | None = None
            for key, capacity in slots:
                reservation = await limiter.reserve(
                    key, capacity=capacity, holder=self.holder, lease=self.lease, now=now
                )
                if reservation is None:
                    denied = Denied(
                        self._jittered(RESERVATION_RETRY_DELAY), "reservation-unavailable", key
                    )
                    break
                held.append(reservation)
            else:
                for key, limit, per in rates:
                    decision = await limiter.acquire_rate(key, limit=limit, window=per, now=now)
                    if not decision.allowed:
                        retry = max(decision.retry_after, MIN_RATE_RETRY)
                        denied = Denied(retry, "rate-limited", key)
                        break
                    if decision.permit is not None:
                        permits.append(decision.permit)
        except Exception as exc:
            # Deny rather than run or fail: running unchecked can break what
            # the limit protects (a third-party quota, a connection cap), and
            # failing would spend an attempt on an infrastructure fault. A
            # snooze uses no attempt and looks again once the limiter answers
            # (the Redis limiter already falls back to Postgres by itself).
            denied = Denied(
                self._jittered(LIMITER_UNAVAILABLE_DELAY), "rate-limiter-unavailable", key
            )
            events.emit(
                events.DISPATCH_RATE_LIMITER_UNAVAILABLE,
                logging.WARNING,
                exc_info=not isinstance(exc, TaskQError),
                actor=ref.name,
                job_id=job_id,
                key=key,
                error=str(exc) or type(exc).__name__,
                retry_after_seconds=denied.retry_after.total_seconds(),
            )
        except BaseException:
            # Cancelled mid-acquire: give back what was taken before re-raising.
            await self._refund(permits, ref.name, job_id)
            await self.release(Admitted(tuple(held), ref.name), job_id=job_id)
            raise
        if denied is None:
            return Admitted(tuple(held), ref.name)
        await self._refund(permits, ref.name, job_id)
        await self.release(Admitted(tuple(held), ref.name), job_id=job_id)
        if denied.reason != "rate-limiter-unavailable":
            events.emit(
                events.DISPATCH_RATE_LIMITED
                if denied.reason == "rate-limited"
                else events.DISPATCH_RESERVATION_UNAVAILABLE,
                logging.DEBUG,
                actor=ref.name,
                job_id=job_id,
                key=denied.key,
                retry_after_seconds=denied.retry_after.total_seconds(),
            )
        return denied

    async def release(self, admitted: Admitted, *, job_id: int | None = None) -> None:
        """Give back every reservation of ``admitted``; best effort, idempotent.

        A failure is logged (``rate-limit-release-failed``) and the slot is
        left to its lease; no ``Exception`` escapes (a cancellation does).
        """
        if not admitted.reservations or self.limiter is None:
            return
        for reservation in admitted.reservations:
            try:
                await self.limiter.release(reservation)
            except Exception as exc:
                events.emit(
                    events.RATE_LIMIT_RELEASE_FAILED,
                    logging.WARNING,
                    exc_info=not isinstance(exc, TaskQError),
                    actor=admitted.actor,
                    job_id=job_id,
                    key=reservation.key,
                    slot=reservation.slot,
                    error=str(exc) or type(exc).__name__,
                    lease_seconds=self.lease.total_seconds(),
                )

    async def _refund(self, permits: list[RatePermit], actor: str, job_id: int | None) -> None:
        """Give back the rate permits of a job that was denied; best effort, like release."""
        if not permits or self.limiter is None:
            return
        for permit in permits:
            try:
                await self.limiter.refund_rate(permit)
            except Exception as exc:
                events.emit(
                    events.RATE_LIMIT_REFUND_FAILED,
                    logging.WARNING,
                    exc_info=not isinstance(exc, TaskQError),
                    actor=actor,
                    job_id=job_id,
                    key=permit.key,
                    window_start=permit.window_start.isoformat(),
                    error=str(exc) or type(exc).__name__,
                )

    def _require(self, ref: ActorLike) -> RateLimiter:
        if self.limiter is None:
            # The startup check refuses such a worker; reaching here is a wiring bug.
            raise ConfigurationError(
                f"actor {ref.name!r} declares rate_limits or reservations, "
                "but the worker has no rate limiter"
            )
        return self.limiter

    def _jittered(self, delay: timedelta) -> timedelta:
        return delay * self._rng(1.0 - RETRY_JITTER, 1.0 + RETRY_JITTER)


def limited_actors(registry: Sequence[ActorLike]) -> list[str]:
    """Names of the actors in ``registry`` that declare limits, sorted."""
    return sorted(ref.name for ref in registry if declares_limits(ref))


__all__ = [
    "LIMITER_UNAVAILABLE_DELAY",
    "MIN_RATE_RETRY",
    "NO_LIMITS",
    "RESERVATION_RETRY_DELAY",
    "RETRY_JITTER",
    "ActorLimits",
    "Admitted",
    "DenialReason",
    "Denied",
    "declares_limits",
    "limited_actors",
]
