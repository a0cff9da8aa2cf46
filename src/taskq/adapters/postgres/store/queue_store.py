"""PostgresQueueStore: the whole QueueStore port over a :class:`Driver`, one role per file."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from taskq.adapters.postgres.call_budget import CallBudget
from taskq.adapters.postgres.driver import Driver
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store.actor_config import ActorConfigOps
from taskq.adapters.postgres.store.base import LockBudgets, call_timeout_of
from taskq.adapters.postgres.store.bound_enqueue import BoundEnqueuer
from taskq.adapters.postgres.store.cancel import CancelOps
from taskq.adapters.postgres.store.claim import ClaimOps
from taskq.adapters.postgres.store.connection_locks import connection_lock
from taskq.adapters.postgres.store.enqueue import Enqueuer
from taskq.adapters.postgres.store.finish import FinishOps
from taskq.adapters.postgres.store.job_admin import JobAdminOps
from taskq.adapters.postgres.store.maintenance import MaintenanceOps
from taskq.adapters.postgres.store.queues import QueueOps
from taskq.adapters.postgres.store.reads import ReadOps
from taskq.adapters.postgres.store.retention import RetentionOps
from taskq.adapters.postgres.store.wake_gate import WakeGate
from taskq.adapters.postgres.store.workers import WorkerOps
from taskq.domain.errors import StoreClosed
from taskq.domain.job import EnqueueResult, NewJob
from taskq.domain.storable import check_new_job, check_new_jobs
from taskq.ports.store_params import (
    CAP_ADVISORY_LOCKS,
    CAP_DURABLE,
    CAP_LISTEN_NOTIFY,
    CAP_MULTI_PROCESS,
    CAP_TRANSACTIONAL_ENQUEUE,
)

#: Durable, shared across processes, enqueue inside the caller's transaction,
#: wake-ups by NOTIFY, leader election by advisory lock.
POSTGRES_CAPABILITIES: frozenset[str] = frozenset(
    {
        CAP_DURABLE,
        CAP_MULTI_PROCESS,
        CAP_TRANSACTIONAL_ENQUEUE,
        CAP_LISTEN_NOTIFY,
        CAP_ADVISORY_LOCKS,
    }
)


class PostgresQueueStore(
    ClaimOps,
    FinishOps,
    WorkerOps,
    ReadOps,
    CancelOps,
    MaintenanceOps,
    RetentionOps,
    ActorConfigOps,
    QueueOps,
    JobAdminOps,
):
    """The QueueStore port on Postgres, for any :class:`Driver`.

    The driver adapters (``taskq.adapters.asyncpg``, ``taskq.adapters.psycopg``)
    subclass it to build the driver from a DSN or a caller-owned pool.
    ``now=None`` everywhere means the database clock: ``now()``, the start of
    the statement's transaction (one value per statement).
    """

    def __init__(
        self,
        driver: Driver,
        *,
        schema: Schema,
        budgets: LockBudgets | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(driver, schema=schema, budgets=budgets, on_close=on_close)
        self._driver_call_timeout = call_timeout_of(driver)
        self._wake_gate = WakeGate(self._send_wake)
        self._enqueuer = Enqueuer(schema, self._budgets, self._wake_gate)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<{type(self).__name__} {state} schema={self._schema.name}>"

    @property
    def capabilities(self) -> frozenset[str]:
        return POSTGRES_CAPABILITIES

    async def _send_wake(self, queue: str) -> None:
        await self._driver.execute(
            "wake_queue", channel=self._schema.wake_channel, wake_queue=queue
        )

    async def close(self) -> None:
        if not self._closed:
            await self._wake_gate.aclose()  # owed wake-ups go out before the pool closes
        await super().close()

    async def ping(self) -> None:
        self._begin()
        await self._driver.fetchval("ping")

    async def enqueue(self, job: NewJob, *, now: datetime | None = None) -> EnqueueResult:
        self._begin(now)
        check_new_job(job)
        call_timeout = self._driver_call_timeout
        if call_timeout is None:
            return await self._enqueuer.enqueue_one(self._driver, job, now)
        # One bound for the whole call, however many statements (retries) it runs.
        async with CallBudget(call_timeout):
            return await self._enqueuer.enqueue_one(self._driver, job, now)

    async def enqueue_many(
        self, jobs: Sequence[NewJob], *, now: datetime | None = None
    ) -> list[EnqueueResult]:
        self._begin(now)
        check_new_jobs(jobs)  # no statement the server would refuse (JSON: the server checks)
        async with CallBudget(self._driver_call_timeout):
            return await self._enqueuer.enqueue_many(self._driver, jobs, now, bound=False)

    def _bound_enqueuer(self, driver: Driver, connection: object) -> BoundEnqueuer:
        """A JobEnqueuer running on ``driver`` (on ``connection``, caller-owned: the driver's
        own connection object, whose lock makes calls on it take turns)."""
        if self._closed:
            raise StoreClosed("Postgres store is closed")
        # No loop check: the caller's connection, not this store's pool, runs the statements.
        return _CheckedBoundEnqueuer(driver, self._enqueuer, connection_lock(connection))


class _CheckedBoundEnqueuer(BoundEnqueuer):
    """A bound enqueuer that refuses unstorable jobs before touching the caller's transaction."""

    async def enqueue_many(
        self, jobs: Sequence[NewJob], *, now: datetime | None = None
    ) -> list[EnqueueResult]:
        check_new_jobs(jobs)
        return await super().enqueue_many(jobs, now=now)


if TYPE_CHECKING:
    from taskq.ports.queue_store import JobEnqueuer, QueueStore

    def _conforms(driver: Driver, schema: Schema) -> QueueStore:
        return PostgresQueueStore(driver, schema=schema)

    def _bound_conforms(driver: Driver, enqueuer: Enqueuer) -> JobEnqueuer:
        return BoundEnqueuer(driver, enqueuer)


__all__ = ["POSTGRES_CAPABILITIES", "PostgresQueueStore"]
