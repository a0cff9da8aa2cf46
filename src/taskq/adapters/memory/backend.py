"""The shared "database" behind every memory store, lock, notifier and limiter.

One :class:`MemoryBackend` is one Postgres schema: several stores made from
it behave like several worker processes on that schema (they share jobs,
workers, actor_config, the leader lock and wake-ups); two backends are two
schemas that never see each other.

Atomicity: the backend itself never awaits. Each store operation does all of
its reads and writes in one synchronous stretch, so concurrent asyncio tasks
see every operation as a single transaction (no claim can be interleaved
with another claim).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import datetime

from taskq.adapters.memory.hub import NotifyHub
from taskq.adapters.memory.leader_lock import MemoryLeaderLock
from taskq.adapters.memory.notifier import MemoryNotifier
from taskq.adapters.memory.rate_limiter import MemoryRateLimiter
from taskq.adapters.memory.rows import ArchivedJob, JobRow, LeaderRow, ReservationRow, WorkerRow
from taskq.adapters.memory.store import MemoryQueueStore
from taskq.domain.actor_config import ActorConfig, QueueMode
from taskq.domain.errors import StoreUnavailable
from taskq.domain.job import AttemptRecord
from taskq.domain.status import (
    OPERATOR_RETRYABLE,
    TERMINAL,
    WAITING,
    JobStatus,
    check_transition,
)
from taskq.ports.clock import Clock

_ACTIVE = (JobStatus.PENDING, JobStatus.SCHEDULED, JobStatus.RUNNING)

#: A pending row's place in its queue: the dispatch order (priority first, then due time, id).
DispatchKey = tuple[int, datetime, int]


def dispatch_key(row: JobRow) -> DispatchKey:
    return (-row.priority, row.scheduled_at, row.id)


class MemoryBackend:
    """Shared state plus the indexes that keep the store's hot paths cheap.

    ``clock`` is the time source for every ``now=None``. Make the ports with
    :meth:`store`, :meth:`leader_lock`, :meth:`notifier` and
    :meth:`rate_limiter`; each call is a new instance (a new "process") on this
    state. :meth:`set_reachable` simulates the database going away for all of
    them at once.
    """

    def __init__(self, *, clock: Clock) -> None:
        self.clock = clock
        self.jobs: dict[int, JobRow] = {}
        self.attempts: dict[int, list[AttemptRecord]] = {}
        self.archive: dict[int, ArchivedJob] = {}
        self.workers: dict[str, WorkerRow] = {}
        self.actor_configs: dict[str, ActorConfig] = {}
        self.queue_modes: dict[str, QueueMode] = {}
        # Each round_robin queue's rotation cursor: the cohort its last claim took last.
        self.rr_cursors: dict[str, str] = {}
        self.leader = LeaderRow()
        self.hub = NotifyHub()
        #: (key, window length in µs, window index since the epoch) → permits granted
        self.rate_windows: dict[tuple[str, int, int], int] = {}
        self.reservations: dict[tuple[str, int], ReservationRow] = {}
        self._job_ids = itertools.count(1)
        self._fencing_tokens = itertools.count(1)
        self._reservation_tokens = itertools.count(1)
        self._reachable = True
        self._by_status: dict[JobStatus, set[int]] = {s: set() for s in JobStatus}
        self._waiting: Counter[str] = Counter()  # pending + scheduled per actor
        self._running: Counter[str] = Counter()  # running per actor
        self._identity: dict[tuple[str, str], int] = {}  # active jobs only
        self._idempotency: dict[tuple[str, str], int] = {}  # every stored job
        # Pending rows per queue in dispatch order (jobs_dispatch_idx): a claim reads the
        # head of its queues instead of sorting every pending row.
        self._pending: dict[str, list[DispatchKey]] = {}

    def __repr__(self) -> str:
        counts = ", ".join(f"{s.value}={len(ids)}" for s, ids in self._by_status.items() if ids)
        return f"MemoryBackend(jobs={len(self.jobs)}{', ' if counts else ''}{counts})"

    # --- port factories -------------------------------------------------------------

    def store(self) -> MemoryQueueStore:
        """A new store on this state (one more worker process or client)."""
        return MemoryQueueStore(self)

    def leader_lock(self) -> MemoryLeaderLock:
        return MemoryLeaderLock(self)

    def notifier(self) -> MemoryNotifier:
        return MemoryNotifier(self)

    def rate_limiter(self) -> MemoryRateLimiter:
        return MemoryRateLimiter(self)

    # --- reachability ---------------------------------------------------------------

    @property
    def reachable(self) -> bool:
        return self._reachable

    def set_reachable(self, reachable: bool) -> None:
        """Simulate the database going down (False) or coming back (True).

        While down, store calls raise ``StoreUnavailable``, limiter calls raise
        ``RateLimitUnavailable``, listening notifiers are disconnected and
        cannot reconnect, and the leader lock is dropped (its holder learns it
        on ``probe()``). State is kept, as a restarted database keeps its data.
        """
        self._reachable = reachable
        if not reachable:
            self.leader.holder = None
            self.hub.disconnect_all()

    def check_reachable(self) -> None:
        if not self._reachable:
            raise StoreUnavailable("memory backend is unreachable (set_reachable(False))")

    # --- id sources -----------------------------------------------------------------

    def next_job_id(self) -> int:
        return next(self._job_ids)

    def next_fencing_token(self) -> int:
        """One global sequence: every claim's token exceeds every earlier token."""
        return next(self._fencing_tokens)

    def next_reservation_token(self) -> str:
        return f"res-{next(self._reservation_tokens)}"

    # --- jobs: the only places that change status or membership ----------------------

    def insert_job(self, row: JobRow) -> None:
        assert row.id not in self.jobs
        assert row.status in WAITING, "new jobs start pending or scheduled"
        self.jobs[row.id] = row
        self._by_status[row.status].add(row.id)
        self._count(row, +1)
        self._index(row, +1)
        if row.identity_key is not None:
            self._identity[(row.actor, row.identity_key)] = row.id
        if row.idempotency_key is not None:
            self._idempotency[(row.actor, row.idempotency_key)] = row.id

    def move(self, row: JobRow, status: JobStatus) -> None:
        """Change ``row``'s status along a legal transition (raises ``IllegalTransition``)."""
        check_transition(row.status, status)
        self._count(row, -1)
        self._index(row, -1)
        self._by_status[row.status].discard(row.id)
        row.status = status
        self._by_status[status].add(row.id)
        self._count(row, +1)
        self._index(row, +1)
        if status in TERMINAL and row.identity_key is not None:
            key = (row.actor, row.identity_key)
            if self._identity.get(key) == row.id:
                del self._identity[key]

    def requeue_finished(self, row: JobRow) -> None:
        """Put a finished row back to pending (an operator's retry; not a lifecycle step, so
        not in ``TRANSITIONS``). Set its ``scheduled_at`` first: it is its dispatch key."""
        assert row.status in OPERATOR_RETRYABLE, f"job {row.id} is {row.status.value}"
        self._by_status[row.status].discard(row.id)
        row.status = JobStatus.PENDING
        self._by_status[row.status].add(row.id)
        self._count(row, +1)
        self._index(row, +1)
        if row.identity_key is not None:
            self._identity[(row.actor, row.identity_key)] = row.id

    def uninsert_job(self, job_id: int) -> None:
        """Undo :meth:`insert_job` of a row nothing else has touched (a rolled-back batch)."""
        row = self.jobs.pop(job_id)
        assert row.status in WAITING
        self._by_status[row.status].discard(job_id)
        self._count(row, -1)
        self._index(row, -1)
        for index, key in (
            (self._identity, row.identity_key),
            (self._idempotency, row.idempotency_key),
        ):
            if key is not None and index.get((row.actor, key)) == job_id:
                del index[(row.actor, key)]

    def remove_job(self, job_id: int) -> JobRow:
        """Delete a finished job (prune); returns the row."""
        row = self.jobs.pop(job_id)
        assert row.status in TERMINAL, "only finished jobs leave the jobs table"
        self._by_status[row.status].discard(job_id)
        if row.idempotency_key is not None:
            key = (row.actor, row.idempotency_key)
            if self._idempotency.get(key) == job_id:
                del self._idempotency[key]
        return row

    def rows_with_status(self, *statuses: JobStatus) -> Iterator[JobRow]:
        """Rows in any of ``statuses``, in id order."""
        ids = sorted(itertools.chain.from_iterable(self._by_status[s] for s in statuses))
        return (self.jobs[i] for i in ids)

    def pending_in_dispatch_order(self, queues: Iterable[str]) -> Iterator[JobRow]:
        """Pending rows of ``queues``, in dispatch order across them.

        Read lazily (a claim stops once it has what it needs): move none of them
        before the iteration ends.
        """
        keys = [self._pending[q] for q in set(queues) if self._pending.get(q)]
        ordered = iter(keys[0]) if len(keys) == 1 else heapq.merge(*keys)
        return (self.jobs[key[2]] for key in ordered)

    def active_rows(self) -> Iterator[JobRow]:
        return self.rows_with_status(*_ACTIVE)

    def waiting_count(self, actor: str) -> int:
        return self._waiting[actor]

    def running_counts(self, actors: Iterable[str]) -> dict[str, int]:
        return {a: self._running[a] for a in actors}

    def active_by_identity(self, actor: str, identity_key: str) -> JobRow | None:
        job_id = self._identity.get((actor, identity_key))
        return None if job_id is None else self.jobs[job_id]

    def stored_by_idempotency(self, actor: str, idempotency_key: str) -> JobRow | None:
        job_id = self._idempotency.get((actor, idempotency_key))
        return None if job_id is None else self.jobs[job_id]

    def record_attempt(self, record: AttemptRecord) -> None:
        self.attempts.setdefault(record.job_id, []).append(record)

    def _index(self, row: JobRow, delta: int) -> None:
        """Enter (``+1``) or leave (``-1``) the pending index when ``row`` is pending.

        Its key must not change while it is in: a row's priority and queue never do,
        and its ``scheduled_at`` is set before it moves to pending.
        """
        if row.status is not JobStatus.PENDING:
            return
        keys = self._pending.setdefault(row.queue, [])
        key = dispatch_key(row)
        if delta > 0:
            bisect.insort(keys, key)
            return
        at = bisect.bisect_left(keys, key)
        assert keys[at] == key, f"job {row.id} is not in the pending index under {key}"
        del keys[at]

    def _count(self, row: JobRow, delta: int) -> None:
        if row.status in WAITING:
            self._waiting[row.actor] += delta
        elif row.status is JobStatus.RUNNING:
            self._running[row.actor] += delta


__all__ = ["DispatchKey", "MemoryBackend", "dispatch_key"]
