"""BoundEnqueuer: enqueue on the caller's own connection, inside its transaction."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

from taskq.adapters.postgres.call_budget import CallBudget, active_budget
from taskq.adapters.postgres.driver import Driver
from taskq.adapters.postgres.store.base import call_timeout_of
from taskq.adapters.postgres.store.enqueue import Enqueuer
from taskq.domain.errors import StoreTimeout
from taskq.domain.job import EnqueueResult, NewJob


class BoundEnqueuer:
    """A ``JobEnqueuer`` on the caller's own connection and transaction.

    Jobs become visible when the caller commits and vanish on rollback. Each
    attempt runs in a savepoint (or in its own transaction when the
    connection is in none), so a refusal never aborts the caller's
    transaction. The caller owns the connection: nothing here closes it.
    """

    def __init__(
        self, driver: Driver, enqueuer: Enqueuer, lock: asyncio.Lock | None = None
    ) -> None:
        self._driver = driver
        self._enqueuer = enqueuer
        # The connection's lock (see connection_locks): calls on it take turns.
        self._lock = lock if lock is not None else asyncio.Lock()

    async def enqueue(self, job: NewJob, *, now: datetime | None = None) -> EnqueueResult:
        return (await self.enqueue_many([job], now=now))[0]

    async def enqueue_many(
        self, jobs: Sequence[NewJob], *, now: datetime | None = None
    ) -> list[EnqueueResult]:
        # Under the driver's call bound, the wait for the connection's turn counts too.
        async with CallBudget(call_timeout_of(self._driver)), _turn(self._lock):
            return await self._enqueuer.enqueue_many(self._driver, jobs, now, bound=True)


@asynccontextmanager
async def _turn(lock: asyncio.Lock) -> AsyncIterator[None]:
    """``lock``, waited for as the caller's connection's turn (what a call that runs out
    of time waiting for it says it waited for)."""
    budget = active_budget()
    if budget is not None:
        budget.on_expiry = _turn_error
    try:
        await lock.acquire()
    finally:
        if budget is not None:
            budget.on_expiry = None
    try:
        yield
    finally:
        lock.release()


def _turn_error(bound: float) -> StoreTimeout:
    return StoreTimeout(
        f"gave up after {bound:g} s waiting for a turn on the connection passed as "
        "connection=: another TaskQ call on it had not finished",
        waited_for="its turn on the caller's connection",
        timeout=bound,
    )


__all__ = ["BoundEnqueuer"]
