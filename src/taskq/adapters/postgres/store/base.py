"""What every role of the Postgres store shares: the driver, the schema, the open check."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from taskq.adapters.postgres.driver import Driver
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store.rows import check_aware
from taskq.domain.errors import StoreClosed

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
        # Claim request shapes (queues, actors) last seen to need claim_mixed.
        self._mixed_claims: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()

    @property
    def schema(self) -> Schema:
        return self._schema

    def _begin(self, now: datetime | None = None) -> datetime | None:
        """Refuse a closed store, then check ``now`` (``None``: the database clock)."""
        if self._closed:
            raise StoreClosed("Postgres store is closed")
        return check_aware(now)

    async def close(self) -> None:
        """Idempotent; closes the pool only when the store built it."""
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            await self._on_close()


__all__ = ["CONFLICT_RETRIES", "LockBudgets", "StoreCore", "lock_timeout_text"]
