"""The part of the store each worker task uses: one role protocol per task.

The port's roles (``taskq.ports.queue_store``) are cut by what a store does; a
worker task often needs a few methods of several of them (the heartbeat
beats, re-registers, releases, escalates, abandons and isolates). Each task
here is typed against exactly the methods it calls, so mypy refuses a call
outside its role, and widening one is a visible change
(``tests/unit/app/worker/test_store_roles.py`` pins the members).

Where a task uses a whole port role it is reused; single methods are
restated below with the port's signature (its docstrings hold the rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from taskq.domain.actor_config import ActorConfig, ActorConfigSyncReport
from taskq.domain.job import ClaimedJob, Lease
from taskq.ports.queue_store import JobEnqueuer, LeaseJanitor, RetentionJanitor
from taskq.ports.store_params import (
    ClaimRequest,
    Finish,
    Heartbeat,
    HeartbeatReport,
    Interruption,
    Isolation,
    QueueDepth,
    Reschedule,
    StrandedJobs,
    WorkerInfo,
)

# -- single methods, as the port declares them -------------------------------------------


class Claims(Protocol):
    async def claim(self, request: ClaimRequest) -> list[ClaimedJob]: ...

    async def finish_and_claim(
        self, finishes: Sequence[Finish], request: ClaimRequest
    ) -> tuple[list[Lease], list[ClaimedJob]]: ...


class MarksStarted(Protocol):
    async def mark_started(
        self,
        leases: Sequence[Lease],
        *,
        now: datetime | None = None,
        started_ago: Sequence[timedelta] | None = None,
    ) -> list[Lease]: ...


class Releases(Protocol):
    async def release(
        self, lease: Lease, *, delay: timedelta, now: datetime | None = None
    ) -> None: ...


class DrainsUnstarted(Protocol):
    async def drain_unstarted(self, worker_id: str, *, now: datetime | None = None) -> int: ...


class FinishesMany(Protocol):
    async def finish_many(self, outcomes: Sequence[Finish]) -> list[Lease]: ...


class Finishes(Protocol):
    async def finish(self, outcome: Finish) -> None: ...


class Reschedules(Protocol):
    async def reschedule(self, request: Reschedule) -> None: ...


class Interrupts(Protocol):
    async def interrupt(self, request: Interruption) -> None: ...


class EscalatesCancel(Protocol):
    async def escalate_cancel(self, lease: Lease, *, now: datetime | None = None) -> None: ...


class Registers(Protocol):
    async def register_worker(self, worker: WorkerInfo, *, now: datetime | None = None) -> None: ...


class Deregisters(Protocol):
    async def deregister_worker(self, worker_id: str) -> None: ...


class Beats(Protocol):
    async def heartbeat(self, beat: Heartbeat) -> HeartbeatReport: ...


class Isolates(Protocol):
    async def isolate_worker(self, request: Isolation) -> list[int]: ...


class CountsActive(Protocol):
    async def count_active(self, queues: Sequence[str] | None = None) -> int: ...


class ReadsQueueDepths(Protocol):
    async def queue_depths(self) -> list[QueueDepth]: ...


class FindsStranded(Protocol):
    async def stranded_actors(
        self,
        queues: Sequence[str] | None = None,
        *,
        stale_after: timedelta,
        now: datetime | None = None,
    ) -> list[StrandedJobs]: ...


class SyncsActorConfigs(Protocol):
    async def sync_actor_configs(
        self, configs: Sequence[ActorConfig], *, force: bool = False
    ) -> ActorConfigSyncReport: ...


class Pings(Protocol):
    async def ping(self) -> None: ...


# -- the tasks' roles ----------------------------------------------------------------------


class StartupStore(Registers, SyncsActorConfigs, Deregisters, Protocol):
    """Start-up and the last deregistration (``startup``)."""


class LeaderStore(
    LeaseJanitor, RetentionJanitor, JobEnqueuer, ReadsQueueDepths, FindsStranded, Protocol
):
    """The leader: its sweeps, cron's enqueues, the queue-depth and stranded-job reads."""


class HandBackStore(Isolates, Protocol):
    """Handing back every job at once (``hand_back``: isolate-self, a trip, a crash)."""


class HeartbeatStore(
    Beats, Registers, Releases, EscalatesCancel, Finishes, HandBackStore, Protocol
):
    """The heartbeat: beats, re-registers, gives back orphans and cancelled queued jobs,
    escalates cancels, abandons, and hands back when it isolates the worker."""


class CompleterStore(FinishesMany, Protocol):
    """The batched terminal writes (``refused_writes.finish_flush``)."""


class StartMarkStore(MarksStarted, Protocol):
    """Start marks and the start gate."""


class ProducerStore(Claims, CompleterStore, Releases, Protocol):
    """The producer: claims (carrying the completer's writes) and gives back a job
    claimed again while an earlier attempt of it still runs here."""


class ConsumerStore(Releases, Reschedules, Interrupts, Protocol):
    """A consumer's own writes: a retry's reschedule, an interruption, the release of
    a job whose actor it lacks (terminal writes go through the completer)."""


class ShutdownStore(DrainsUnstarted, Releases, Interrupts, MarksStarted, HandBackStore, Protocol):
    """The shutdown: the drain, releasing queued jobs, interrupting running ones, marks of
    unwritten jobs, and the hand-back when it leaves at once."""


class UntilIdleStore(CountsActive, FindsStranded, Protocol):
    """The until-idle monitor: is there work left, and can anyone run it."""


class HealthStore(Pings, Protocol):
    """The health socket's ``/ready`` check."""


#: Every task's role, by task name (the pinning test reads it).
TASK_ROLES: dict[str, type[Protocol]] = {  # type: ignore[valid-type]
    "startup": StartupStore,
    "leader": LeaderStore,
    "heartbeat": HeartbeatStore,
    "hand_back": HandBackStore,
    "completer": CompleterStore,
    "start_marks": StartMarkStore,
    "producer": ProducerStore,
    "consumer": ConsumerStore,
    "shutdown": ShutdownStore,
    "until_idle": UntilIdleStore,
    "health": HealthStore,
}
