"""What every role of the Postgres store shares: the driver, the schema, the open check."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from taskq.adapters.postgres.driver import Driver
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store.rows import check_aware
from taskq.domain.errors import ConfigurationError, StoreClosed
from taskq.domain.lock_budget import bounded_lock_budget_ms

#: How often a statement that lost a race (deadlock, unique conflict) is re-run.
CONFLICT_RETRIES: Final = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class LockBudgets:
    """How long enqueue may wait for each lock, in milliseconds (``<= 0``: no bound).

    The defaults are ``TASKQ_MAX_PENDING_LOCK_TIMEOUT_MS``,
    ``TASKQ_UNIQUE_LOCK_TIMEOUT_MS`` and ``TASKQ_IDEMPOTENCY_LOCK_TIMEOUT_MS``.
    Each becomes a transaction-local ``lock_timeout``; its expiry is the typed
    refusal (``MaxPendingLockTimeoutError``, ``UniqueForLockTimeoutError``,
    ``IdempotencyKeyLockTimeoutError``).
    """

    max_pending_ms: float = 200.0
    unique_ms: float = 200.0
    idempotency_ms: float = 200.0


def budget_lock_timeout(budget_ms: float, driver: object) -> str:
    """``lock_timeout`` for ``budget_ms`` on ``driver``, kept below half of the driver's
    client-side bound: its ``command_timeout`` (only asyncpg's have one) and its
    ``call_timeout`` (a client's, see ``postgres.call_budget``), whichever is shorter.

    Under a call bound a budget of 0 or less (no budget of its own) becomes half
    the bound too: the call cannot wait longer anyway, and the server's verdict
    names the lock where the client's deadline could not.
    """
    return lock_timeout_text(_budget_ms(budget_ms, driver))


def _budget_ms(budget_ms: float, driver: object) -> float:
    timeout = getattr(driver, "command_timeout", None)
    bound = timeout if isinstance(timeout, int | float) else None
    call = call_timeout_of(driver)
    if call is not None:
        bound = call if bound is None or bound <= 0 else min(bound, call)
        if budget_ms <= 0:
            budget_ms = call * 1000.0  # clamped to its share below
    return bounded_lock_budget_ms(budget_ms, bound)


def call_timeout_of(driver: object) -> float | None:
    """The driver's per-call bound in seconds (``call_timeout``), if it has one."""
    call = getattr(driver, "call_timeout", None)
    return float(call) if isinstance(call, int | float) and call > 0 else None


def call_lock_wait(driver: object) -> tuple[str | None, float | None]:
    """The ``lock_timeout`` a statement that may wait on a row lock sets under the
    driver's call bound, and that wait in seconds; ``(None, None)`` without a bound
    (the session's own ``lock_timeout`` stands)."""
    if call_timeout_of(driver) is None:
        return None, None
    wait_ms = _budget_ms(0.0, driver)
    return lock_timeout_text(wait_ms), wait_ms / 1000.0


def lock_timeout_text(budget_ms: float) -> str:
    """A ``lock_timeout`` value: whole milliseconds, rounded up; ``0`` waits without bound."""
    if budget_ms <= 0:
        return "0"
    whole = int(budget_ms)
    return f"{whole if whole == budget_ms else whole + 1}ms"


class StoreCore:
    """State shared by the store's role mixins.

    ``on_close`` releases what the store owns (its pool); a store on a
    caller-owned pool closes nothing but still refuses calls after ``close``.
    """

    def __init__(
        self,
        driver: Driver,
        *,
        schema: Schema,
        budgets: LockBudgets | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._driver = driver
        self._schema = schema
        self._budgets = budgets or LockBudgets()
        self._on_close = on_close
        self._closed = False
        # The event loop of the first call: the pool's connections belong to it.
        self._loop: asyncio.AbstractEventLoop | None = None
        # Claim request shapes (queues, actors) last seen to need claim_mixed.
        self._mixed_claims: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()

    @property
    def schema(self) -> Schema:
        return self._schema

    def _begin(self, now: datetime | None = None) -> datetime | None:
        """Refuse a closed store, then check ``now`` (``None``: the database clock)."""
        if self._closed:
            raise StoreClosed("Postgres store is closed")
        self._check_loop()
        return check_aware(now)

    def _check_loop(self) -> None:
        """Refuse a call from another event loop than the first call's.

        A pool's connections belong to the loop they were opened on: from another
        loop asyncpg fails deep inside and psycopg waits forever.
        """
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise ConfigurationError(
                "this TaskQ client/store is bound to the event loop it was first used on "
                "and was now called from another one (its pool's connections cannot "
                "move between loops): open one client per event loop, for example "
                "per test when each test runs its own loop"
            )

    async def close(self) -> None:
        """Idempotent; closes the pool only when the store built it."""
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            await self._on_close()


__all__ = [
    "CONFLICT_RETRIES",
    "LockBudgets",
    "StoreCore",
    "budget_lock_timeout",
    "call_lock_wait",
    "call_timeout_of",
    "lock_timeout_text",
]
