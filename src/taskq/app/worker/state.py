"""What the worker's siblings share: events, the local queue, the in-flight jobs."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from taskq.app.observability.metrics import WorkerMetrics, new_metrics_registry
from taskq.app.settings import WorkerSettings
from taskq.app.worker.batching import GroupCommit
from taskq.app.worker.claim_pace import ClaimPace
from taskq.app.worker.liveness import Liveness
from taskq.app.worker.local_queue import LocalQueue
from taskq.app.worker.ports import WorkerPorts
from taskq.app.worker.protocols import ActorLike
from taskq.app.worker.refused_writes import Written
from taskq.app.worker.state_parts import Leadership, LeaseWatch, OutcomeLedger, Stopping
from taskq.app.worker.waiting import LatchEvent
from taskq.app.worker.write_bounds import WriteBounds
from taskq.domain.cancel import GracePeriods
from taskq.domain.job import ClaimedJob
from taskq.domain.timeouts import AttemptBound
from taskq.ports.clock import Clock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import WorkerStore
from taskq.ports.rate_limiter import RateLimiter
from taskq.ports.store_params import Finish

if TYPE_CHECKING:
    from opentelemetry.trace import Span

#: Why a job's cancel_event was set. A user request ends the job ``cancelled``; the
#: worker's shutdown or a lost lease interrupts it (see ``consumer``): never cancelled;
#: the attempt's timeout or its job's deadline fails the attempt (see ``timeouts``).
CancelReason = Literal["request", "shutdown", "lease_lost", "timeout", "deadline"]


class CancelEvent(asyncio.Event):
    """A job's ``ctx.cancel_event`` that remembers whether the actor saw it set.

    ``observed`` turns true when the actor reads it as set (``is_set()``, which
    ``ctx.cancelled`` calls, also from a sync actor's thread) or a ``wait()``
    on it returns. It tells a cooperative early return (the actor stopped
    because it was asked to) from a job that simply finished.
    """

    observed = False

    def is_set(self) -> bool:
        value = super().is_set()
        if value:
            self.observed = True
        return value

    async def wait(self) -> Literal[True]:
        result = await super().wait()
        self.observed = True
        return result


class StartMarksLike(Protocol):
    """What the shutdown's drain needs of the start marks (``start_marks.StartMarks``)."""

    async def flush(self) -> bool:
        """Mark every started job now; False when the write failed."""
        ...


@dataclass(eq=False)
class ActiveJob:
    """One job a consumer marked started and is executing (the ActiveJobRegistry entry)."""

    job: ClaimedJob
    ref: ActorLike
    cancel_event: CancelEvent = field(default_factory=CancelEvent)
    task: asyncio.Task[Any] | None = None
    cancel_reason: CancelReason | None = None
    forced: bool = False
    #: It runs only once its start mark landed (``start_gate.needs_gate``).
    gated: bool = False
    #: The abandonment write is queued or done: the consumer must not write ``cancelled``.
    abandon_queued: bool = False
    #: The consumer is writing the outcome: the job is ending, not lost.
    finishing: bool = False
    #: When the consumer took it, on the clock's monotonic time (its start mark says so later).
    started_mono: float = 0.0
    #: The worker stopped waiting for it (shutdown complete): no outcome is written.
    stop_waiting: bool = False
    #: Done when the task is done or the worker stops waiting for it.
    settled: asyncio.Future[None] | None = None
    #: How the actor function itself ended, ``(value, error, cancel_reason then)``, set
    #: before its TRANSIENT teardown: the outcome, whatever happens to the task after.
    actor_ended: tuple[Any, BaseException | None, CancelReason | None] | None = None
    #: The attempt's timeout or deadline, once it was reached (``timeouts``), else None.
    expired: AttemptBound | None = None
    #: The attempt's CONSUMER span (``attempt_span``), when the worker traces.
    span: Span | None = None

    def __repr__(self) -> str:
        return (
            f"<ActiveJob {self.job.id} {self.job.actor} attempt={self.job.attempt} "
            f"cancel={self.cancel_reason} forced={self.forced}>"
        )

    def request_cancel(self, reason: CancelReason) -> None:
        """Set ``cancel_event``; the first reason sticks (a user request wins a tie)."""
        if self.cancel_reason is None or (reason == "request" and not self.forced):
            self.cancel_reason = reason
        self.cancel_event.set()

    def force_cancel(self, reason: CancelReason) -> None:
        """Cancel the job's task (after setting its event, so ``ctx.cancelled`` reads true)."""
        self.request_cancel(reason)
        self.forced = True
        if self.task is not None and not self.task.done():
            self.task.cancel()


class ActiveJobsView(Protocol):
    """The in-flight jobs as every task but the consumers sees them: read, never changed
    (a job is asked to stop through its own ``request_cancel`` / ``force_cancel``)."""

    @property
    def busy(self) -> int: ...

    @property
    def changed(self) -> asyncio.Event: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[ActiveJob]: ...

    def __contains__(self, job_id: object) -> bool: ...

    def get(self, job_id: int) -> ActiveJob | None: ...

    def ids(self) -> set[int]: ...


class ActiveJobs:
    """In-flight jobs by id, and how many jobs consumers hold at all.

    ``busy`` counts jobs a consumer took off the local queue and has not
    finished with (including those not yet marked started); it is the
    shutdown's in-flight count. ``changed`` is set whenever one is finished.
    """

    def __init__(self) -> None:
        self._jobs: dict[int, ActiveJob] = {}
        self.busy = 0
        self.changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._jobs)

    def __iter__(self) -> Iterator[ActiveJob]:
        # A snapshot: callers await between items while consumers add and remove.
        return iter(list(self._jobs.values()))

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def get(self, job_id: int) -> ActiveJob | None:
        return self._jobs.get(job_id)

    def ids(self) -> set[int]:
        return set(self._jobs)

    def add(self, active: ActiveJob) -> None:
        self._jobs[active.job.id] = active

    def remove(self, job_id: int) -> None:
        self._jobs.pop(job_id, None)

    def enter(self) -> None:
        """A consumer took a job."""
        self.busy += 1

    def leave(self) -> None:
        """A consumer is done with its job (whatever happened to it)."""
        self.busy -= 1
        self.changed.set()


@dataclass(eq=False, kw_only=True)
class WorkerState:
    """What the siblings of one worker share. Only the event loop touches it.

    Fixed for the worker's life: its settings, ports, registry and id. The
    channels between tasks: the shutdown and producer-stop latches, wake-ups,
    the local queue, the in-flight jobs. Then the parts of ``state_parts``, each
    changed by one task only (``task_views`` types each task against what it
    may see and change).
    """

    settings: WorkerSettings
    ports: WorkerPorts
    registry: Mapping[str, ActorLike]
    worker_id: str
    rng: random.Random = field(default_factory=random.Random)
    #: A latch, so the per-job races against it need no ``wait()`` task.
    shutdown_event: LatchEvent = field(default_factory=LatchEvent)
    producer_stop: LatchEvent = field(default_factory=LatchEvent)
    #: Set by the listener (a wake-up arrived) and by the leader's promotion.
    wake: LatchEvent = field(default_factory=LatchEvent)
    #: Set by a consumer that took a job off the local queue and left room for a
    #: claim worth making (``claim_room() >= claim_threshold``, the producer's rule).
    slot_freed: LatchEvent = field(default_factory=LatchEvent)
    #: Held by the producer while it claims, so a drain never races a claim.
    claim_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    active: ActiveJobs = field(default_factory=ActiveJobs)
    leadership: Leadership = field(default_factory=Leadership)
    ledger: OutcomeLedger = field(default_factory=OutcomeLedger)
    sibling_crashes: Counter[str] = field(default_factory=Counter)
    #: Where the siblings record metrics (the runtime's; this default records on a registry
    #: of its own, without OpenTelemetry).
    metrics: WorkerMetrics = field(default_factory=lambda: _unwatched_metrics())
    #: Writes start marks for jobs still running a moment after they started (the runtime's).
    start_marks: StartMarksLike | None = None
    #: The consumers' batched terminal writes; the producer sends them along with its claims.
    completer: GroupCommit[Finish, Written] | None = None
    stopping: Stopping = field(init=False)
    watch: LeaseWatch = field(init=False)
    local_queue: LocalQueue[ClaimedJob] = field(init=False)
    #: Recent claim and job durations: how far ahead the producer claims.
    claim_pace: ClaimPace = field(init=False)
    liveness: Liveness = field(init=False)
    #: How long each write of this worker may take (one helper for every writer).
    write_bounds: WriteBounds = field(init=False)

    def __post_init__(self) -> None:
        self.stopping = Stopping(
            shutdown_event=self.shutdown_event, producer_stop=self.producer_stop
        )
        self.local_queue = LocalQueue(self.settings.max_concurrency)
        self.claim_pace = ClaimPace(self.settings.max_concurrency)
        # Consumers waiting for a job return once the shutdown completes.
        self.shutdown_event.on_set(self.local_queue.close)
        self.watch = LeaseWatch.new(
            GracePeriods(
                cancellation_grace_period=self.settings.cancellation_grace_period,
                cleanup_grace_period=self.settings.cleanup_grace_period,
            )
        )
        self.liveness = Liveness(self.ports.clock)
        self.write_bounds = WriteBounds(
            self.ports.clock,
            lease=self.settings.lock_lease,
            command_timeout=self.settings.heartbeat_command_timeout,
            stop=self.shutdown_event,
        )

    def __repr__(self) -> str:
        return (
            f"<WorkerState {self.worker_id} active={len(self.active)} "
            f"queued={self.local_queue.qsize()} leader={self.leadership.is_leader} "
            f"shutdown={self.stopping.in_progress}>"
        )

    @property
    def store(self) -> WorkerStore:
        return self.ports.store

    @property
    def clock(self) -> Clock:
        return self.ports.clock

    @property
    def leader_lock(self) -> LeaderLock:
        return self.ports.leader_lock

    @property
    def notifier(self) -> Notifier | None:
        return self.ports.notifier

    @property
    def rate_limiter(self) -> RateLimiter | None:
        return self.ports.rate_limiter

    @property
    def queues(self) -> list[str]:
        return list(self.settings.queues)

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.settings.lock_lease)

    @property
    def claim_threshold(self) -> int:
        """Free local-queue slots worth a claim while the queue is not empty.

        Half the queue: the consumers still have work, and one claim of many
        rows costs the database far less than many claims of one.
        """
        return max(1, self.local_queue.maxsize // 2)

    def claim_room(self) -> int:
        """Jobs the next claim may ask for: the free slots, plus what the consumers will
        free while it is in flight; none while the queue holds more than its size.

        The producer sizes its claims by it and the consumers wake the producer by it:
        one rule, so neither waits for a claim the other would already make.
        """
        queue = self.local_queue
        if queue.qsize() > queue.maxsize:
            return 0
        return queue.free() + self.claim_pace.ahead()


def _unwatched_metrics() -> WorkerMetrics:
    return WorkerMetrics(new_metrics_registry(), otel_enabled=False, group="default")
