"""MemoryQueueStore: the whole QueueStore port, one role mixin per file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from taskq.adapters.memory.store_admin import AdminOps
from taskq.adapters.memory.store_cancel import CancelOps
from taskq.adapters.memory.store_claim import ClaimOps
from taskq.adapters.memory.store_enqueue import EnqueueOps
from taskq.adapters.memory.store_finish import FinishOps
from taskq.adapters.memory.store_job_admin import JobAdminOps
from taskq.adapters.memory.store_maintenance import MaintenanceOps
from taskq.adapters.memory.store_reads import ReadOps
from taskq.adapters.memory.store_workers import WorkerOps
from taskq.domain.job import ClaimedJob, Lease
from taskq.ports.store_params import CAP_ADVISORY_LOCKS, CAP_LISTEN_NOTIFY, ClaimRequest, Finish

#: Memory has a leader lock and wake-ups, but no durability, no caller
#: transactions, and no sharing across processes.
MEMORY_CAPABILITIES: frozenset[str] = frozenset({CAP_LISTEN_NOTIFY, CAP_ADVISORY_LOCKS})


class MemoryQueueStore(
    EnqueueOps,
    ClaimOps,
    FinishOps,
    WorkerOps,
    ReadOps,
    CancelOps,
    MaintenanceOps,
    AdminOps,
    JobAdminOps,
):
    """A QueueStore on a :class:`~taskq.adapters.memory.backend.MemoryBackend`.

    Make one with ``backend.store()``. Stores on the same backend share all
    state, like worker processes on one database. Every call is atomic and
    returns copies. After :meth:`close` every call raises ``StoreUnavailable``.
    """

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<MemoryQueueStore {state} on {self._db!r}>"

    @property
    def capabilities(self) -> frozenset[str]:
        return MEMORY_CAPABILITIES

    async def ping(self) -> None:
        await self._begin()

    async def finish_and_claim(
        self, finishes: Sequence[Finish], request: ClaimRequest
    ) -> tuple[list[Lease], list[ClaimedJob]]:
        # One atomic step, as Postgres's one statement: the writes, then the claim.
        now = await self._begin(request.now)
        lost = self._finish_many_now(finishes)
        return lost, self._claim_now(request, now)

    async def close(self) -> None:
        self._closed = True


if TYPE_CHECKING:
    from taskq.adapters.memory.backend import MemoryBackend
    from taskq.ports.queue_store import QueueStore

    def _conforms(backend: MemoryBackend) -> QueueStore:
        return MemoryQueueStore(backend)


__all__ = ["MEMORY_CAPABILITIES", "MemoryQueueStore"]
