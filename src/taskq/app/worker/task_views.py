"""What each worker task sees of the worker's state: one protocol per task.

``WorkerState`` satisfies every one of them; each task is typed against its
own, so mypy holds it to its part:

- its store role (``store_roles``), never the whole store;
- a field the task owns (it is the one that changes it) is a plain attribute;
  one it only reads is a read-only property, and its containers read-only
  types, so a task cannot assign another task's state;
- what a task changes of another's part (a wake-up, a request to stop, a lease
  to let lapse) goes through the owner's methods.

Purely static: at run time every task holds the one ``WorkerState``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from datetime import timedelta
from typing import Protocol

from taskq.app.observability.metrics import WorkerMetrics
from taskq.app.settings import WorkerSettings
from taskq.app.worker.batching import GroupCommit
from taskq.app.worker.claim_pace import ClaimPace
from taskq.app.worker.liveness import Liveness
from taskq.app.worker.local_queue import LocalQueue
from taskq.app.worker.protocols import ActorLike
from taskq.app.worker.refused_writes import Written
from taskq.app.worker.state import ActiveJobs, ActiveJobsView, StartMarksLike
from taskq.app.worker.state_parts import (
    Leadership,
    LeadershipView,
    LeaseWatch,
    LeaseWatchView,
    OutcomeLedger,
    OutcomeLedgerView,
    Stopping,
    StoppingView,
)
from taskq.app.worker.store_roles import (
    ConsumerStore,
    HandBackStore,
    HealthStore,
    HeartbeatStore,
    LeaderStore,
    ProducerStore,
    ShutdownStore,
    StartMarkStore,
    StartupStore,
    UntilIdleStore,
)
from taskq.app.worker.waiting import LatchEvent
from taskq.app.worker.write_bounds import WriteBounds
from taskq.domain.job import ClaimedJob
from taskq.ports.clock import Clock
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.rate_limiter import RateLimiter
from taskq.ports.store_params import Finish


class WorkerBasics(Protocol):
    """What every task reads: fixed for the worker's life, or a channel (the shutdown)."""

    @property
    def settings(self) -> WorkerSettings: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def worker_id(self) -> str: ...

    @property
    def registry(self) -> Mapping[str, ActorLike]: ...

    @property
    def queues(self) -> list[str]: ...

    @property
    def lease(self) -> timedelta: ...

    @property
    def metrics(self) -> WorkerMetrics: ...

    @property
    def liveness(self) -> Liveness: ...

    @property
    def shutdown_event(self) -> LatchEvent: ...

    @property
    def stopping(self) -> StoppingView: ...

    @property
    def write_bounds(self) -> WriteBounds: ...


class Wakes(Protocol):
    """The producer's wake-up, set by the listener and the leader's promotion."""

    @property
    def wake(self) -> LatchEvent: ...


class FreesSlots(Protocol):
    """What a task that takes jobs off the local queue needs to wake the producer by its rule."""

    @property
    def local_queue(self) -> LocalQueue[ClaimedJob]: ...

    @property
    def slot_freed(self) -> LatchEvent: ...

    @property
    def claim_pace(self) -> ClaimPace: ...

    @property
    def claim_threshold(self) -> int: ...

    def claim_room(self) -> int: ...


class StartupView(WorkerBasics, Protocol):
    @property
    def store(self) -> StartupStore: ...

    @property
    def rate_limiter(self) -> RateLimiter | None: ...


class HandBackView(WorkerBasics, Protocol):
    @property
    def store(self) -> HandBackStore: ...

    @property
    def active(self) -> ActiveJobsView: ...


class LeaderView(WorkerBasics, Protocol):
    @property
    def store(self) -> LeaderStore: ...

    @property
    def leader_lock(self) -> LeaderLock: ...

    @property
    def notifier(self) -> Notifier | None: ...

    @property
    def rate_limiter(self) -> RateLimiter | None: ...

    @property
    def wake(self) -> LatchEvent: ...

    #: The leader's own: whether it leads (and the shutdown's request to let go).
    @property
    def leadership(self) -> Leadership: ...


class HeartbeatView(HandBackView, FreesSlots, Protocol):
    @property
    def store(self) -> HeartbeatStore: ...

    @property
    def rate_limiter(self) -> RateLimiter | None: ...

    @property
    def leadership(self) -> LeadershipView: ...

    @property
    def ledger(self) -> OutcomeLedgerView: ...

    @property
    def producer_stop(self) -> LatchEvent: ...

    #: The heartbeat's own.
    @property
    def watch(self) -> LeaseWatch: ...


class ProducerView(WorkerBasics, FreesSlots, Wakes, Protocol):
    @property
    def store(self) -> ProducerStore: ...

    @property
    def active(self) -> ActiveJobsView: ...

    @property
    def watch(self) -> LeaseWatchView: ...

    @property
    def producer_stop(self) -> LatchEvent: ...

    @property
    def claim_lock(self) -> asyncio.Lock: ...

    @property
    def completer(self) -> GroupCommit[Finish, Written] | None: ...


class ConsumerView(WorkerBasics, FreesSlots, Protocol):
    @property
    def store(self) -> ConsumerStore: ...

    @property
    def rate_limiter(self) -> RateLimiter | None: ...

    @property
    def rng(self) -> random.Random: ...

    @property
    def active(self) -> ActiveJobs: ...

    @property
    def watch(self) -> LeaseWatchView: ...

    #: The consumers' own.
    @property
    def ledger(self) -> OutcomeLedger: ...


class StartMarksView(WorkerBasics, Protocol):
    @property
    def store(self) -> StartMarkStore: ...

    @property
    def active(self) -> ActiveJobsView: ...


class ShutdownView(WorkerBasics, Protocol):
    @property
    def store(self) -> ShutdownStore: ...

    @property
    def active(self) -> ActiveJobsView: ...

    @property
    def local_queue(self) -> LocalQueue[ClaimedJob]: ...

    @property
    def producer_stop(self) -> LatchEvent: ...

    @property
    def claim_lock(self) -> asyncio.Lock: ...

    @property
    def leadership(self) -> LeadershipView: ...

    @property
    def ledger(self) -> OutcomeLedgerView: ...

    @property
    def start_marks(self) -> StartMarksLike | None: ...

    #: The shutdown's own.
    @property
    def stopping(self) -> Stopping: ...


class UntilIdleView(WorkerBasics, Protocol):
    @property
    def store(self) -> UntilIdleStore: ...

    @property
    def active(self) -> ActiveJobsView: ...

    @property
    def local_queue(self) -> LocalQueue[ClaimedJob]: ...

    @property
    def ledger(self) -> OutcomeLedgerView: ...


class ListenerView(WorkerBasics, Wakes, Protocol):
    @property
    def notifier(self) -> Notifier | None: ...


class WatchdogView(WorkerBasics, Protocol):
    @property
    def watch(self) -> LeaseWatchView: ...


class HealthView(WorkerBasics, Protocol):
    """The health socket and the scrape-time gauges (read from their own threads)."""

    @property
    def store(self) -> HealthStore: ...

    @property
    def active(self) -> ActiveJobsView: ...

    @property
    def local_queue(self) -> LocalQueue[ClaimedJob]: ...

    @property
    def leadership(self) -> LeadershipView: ...


__all__ = [
    "ConsumerView",
    "HandBackView",
    "HealthView",
    "HeartbeatView",
    "LeaderView",
    "ListenerView",
    "ProducerView",
    "ShutdownView",
    "StartMarksView",
    "StartupView",
    "UntilIdleView",
    "WatchdogView",
    "WorkerBasics",
]
