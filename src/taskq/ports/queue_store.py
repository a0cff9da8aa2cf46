"""QueueStore port: everything TaskQ persists, as small role protocols.

Each part of the app types against only the roles it uses (the producer needs
``JobClaimer``, not ``RetentionJanitor``). ``QueueStore`` is their union.

Rules every adapter keeps:
- Status changes follow ``taskq.domain.status.TRANSITIONS``, plus an
  operator's retry (``JobAdmin.retry_job``); nothing else.
- Every owner write (``JobFinisher``, ``JobClaimer.release``) matches on the
  lease's fencing token and on status running. A write that matches nothing
  raises ``LeaseLost`` and changes nothing.
- Every claim issues a fencing token different from any the job had before.
- A running job whose cancel was requested (``cancel_phase >= 1``) never
  waits again: every write or sweep that would make it pending or scheduled
  (reschedule, release, drain, reclaim, isolation) makes it cancelled,
  finished then, instead.
- Ids increase in enqueue order (the FIFO tie-break).
- Errors are domain errors (``taskq.domain.errors``), never driver errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from taskq.domain.actor_config import ActorConfig, ActorConfigSyncReport, QueueMode
from taskq.domain.job import AttemptRecord, ClaimedJob, EnqueueResult, Job, Lease, NewJob
from taskq.domain.status import JobStatus
from taskq.ports.store_params import (
    CapacityUpdate,
    ClaimRequest,
    Finish,
    Heartbeat,
    HeartbeatReport,
    Interruption,
    Isolation,
    JobQuery,
    PrunePolicy,
    QueueDepth,
    ReclaimReport,
    Reschedule,
    StrandedJobs,
    WorkerInfo,
    WorkerRecord,
    WorkerStatus,
)


class JobEnqueuer(Protocol):
    """Writes new jobs.

    - A job with ``scheduled_at`` after ``now`` is stored ``scheduled``, else
      ``pending`` with ``scheduled_at = now``.
    - ``identity_key``: while a job of the same actor with that key is
      pending, scheduled or running, enqueue returns it with
      ``was_existing=True`` and writes nothing.
    - ``idempotency_key``: while any job of the same actor with that key is
      stored (any status), enqueue returns it with ``was_existing=True``.
    - ``max_pending`` (stored actor_config value, else the job's literal):
      when the actor already has that many pending+scheduled jobs the
      enqueue raises ``MaxPendingExceeded``. These rules hold under
      concurrent enqueuers: no duplicates, no overshoot. A bounded lock
      wait that expires raises the matching ``*LockTimeoutError``.
    - ``enqueue_many`` applies the same rules per job, atomically (all or
      nothing), returns results in input order, and wakes listeners once.
    - A value no store can keep (too long a name or key, NUL, a lone
      surrogate, an ``attempt_timeout`` not positive or past 365,250 days,
      ...) raises ``ValueError`` naming the ``NewJob`` field before anything is
      written: ``taskq.domain.storable.check_new_job(s)`` says exactly which.
    - ``attempt_timeout`` is stored with the job and returned by every claim
      (``ClaimedJob.attempt_timeout``) and read (``Job.attempt_timeout``).
    """

    async def enqueue(self, job: NewJob, *, now: datetime | None = None) -> EnqueueResult: ...

    async def enqueue_many(
        self, jobs: Sequence[NewJob], *, now: datetime | None = None
    ) -> list[EnqueueResult]: ...


class JobClaimer(Protocol):
    """Hands due work to workers, exclusively.

    - ``claim`` picks due pending jobs (``scheduled_at <= now``) in the order
      of ``taskq.domain.dispatch`` (strict FIFO or round robin per queue
      mode), never more per actor than its stored ``max_concurrent`` minus
      its running jobs, and marks them running, locked by the worker until
      ``now + lease``, with a fresh fencing token and ``attempt + 1``.
      Concurrent claimers never receive the same job. The first
      ``request.start_now`` of them (in dispatch order) are marked started
      (``started_at = now``, ``ClaimedJob.started``); the others have no
      ``started_at`` until ``mark_started``.
    - ``mark_started`` records that the consumer is about to execute these
      jobs (``started_at`` = ``now``, or ``now - started_ago[i]`` when given:
      one non-negative delta per lease, else ``ValueError``); a mark already
      written is kept. It returns the leases that are no longer held. The
      worker runs a job only once it is marked, so ``started_at`` empty means
      the job never ran: every rule below that treats unstarted jobs as not
      run relies on it.
    - ``release`` gives an owned job back (unknown actor): scheduled after
      ``delay``, attempt refunded. Raises ``LeaseLost`` when not owned.
    - ``drain_unstarted`` re-pends this worker's running jobs that never
      started (attempt refunded; cancelled if a cancel was requested) and
      returns how many.
    - ``finish_and_claim`` is ``JobFinisher.finish_many(finishes)`` followed
      by ``claim(request)`` as one call (a busy worker sends the jobs it
      finished with its next claim: one round trip and, on Postgres, one
      commit per round). It returns the leases that were not owned and the
      claimed jobs. The writes come first: a job finished here is never
      claimed by the same call. A call that raises may have written all or
      none of the finishes (never some), and claimed nothing.
    """

    async def claim(self, request: ClaimRequest) -> list[ClaimedJob]: ...

    async def finish_and_claim(
        self, finishes: Sequence[Finish], request: ClaimRequest
    ) -> tuple[list[Lease], list[ClaimedJob]]: ...

    async def mark_started(
        self,
        leases: Sequence[Lease],
        *,
        now: datetime | None = None,
        started_ago: Sequence[timedelta] | None = None,
    ) -> list[Lease]: ...

    async def release(
        self, lease: Lease, *, delay: timedelta, now: datetime | None = None
    ) -> None: ...

    async def drain_unstarted(self, worker_id: str, *, now: datetime | None = None) -> int: ...


class JobFinisher(Protocol):
    """Owner writes that end or reschedule an attempt; all fenced.

    - ``finish`` writes a terminal status, the result or error, finished_at,
      and an attempt record. Raises ``LeaseLost`` if not owned.
    - ``finish_many`` does the same for many jobs in one round trip and
      returns the leases that were not owned (those rows are untouched).
    - ``reschedule`` implements retry, snooze and RetryAfter (see
      ``Reschedule``) and records the attempt. Raises ``LeaseLost``.
    - ``escalate_cancel`` persists cancel phase FORCED for an owned job (a
      user's cancel request moving on; a worker's own interruptions never
      write a cancel phase).
    - ``interrupt``: see ``Interruption``. Raises ``LeaseLost``.
    """

    async def finish(self, outcome: Finish) -> None: ...

    async def finish_many(self, outcomes: Sequence[Finish]) -> list[Lease]: ...

    async def reschedule(self, request: Reschedule) -> None: ...

    async def escalate_cancel(self, lease: Lease, *, now: datetime | None = None) -> None: ...

    async def interrupt(self, request: Interruption) -> None: ...


class WorkerRegistry(Protocol):
    """Worker liveness.

    - ``heartbeat`` in one transaction: sets the worker's last_seen_at,
      extends the lock of every running job it owns to ``now + lease``, pings
      the leader row when ``is_leader``, and reports those jobs with their
      cancel phase. Jobs someone else now owns are not reported. A worker
      without a row (removed as stale) is reported ``registered=False``; the
      heartbeat creates no row itself. It never waits for a job row another
      session holds locked (an application's ``SELECT ... FOR UPDATE`` or
      ``FOR SHARE``, which it may take): that job is reported all the same (as
      the heartbeat read it, its cancel phase too), but its lease is not
      extended; the first heartbeat after the lock ends extends it. A lock held
      past the lease lets the lease expire, and the leader's sweep, which skips
      locked rows too, takes the job back once the lock ends. See
      ``Heartbeat.timeout`` for the bound a caller may give.
    - ``isolate_worker``: see ``Isolation`` (a row locked elsewhere is skipped,
      not waited for); returns the affected job ids.
    """

    async def register_worker(self, worker: WorkerInfo, *, now: datetime | None = None) -> None: ...

    async def heartbeat(self, beat: Heartbeat) -> HeartbeatReport: ...

    async def deregister_worker(self, worker_id: str) -> None: ...

    async def isolate_worker(self, request: Isolation) -> list[int]: ...

    async def list_workers(self) -> list[WorkerRecord]: ...


class JobReader(Protocol):
    """Reads. ``count_active`` counts pending, scheduled and running jobs.

    ``stranded_actors`` reports the waiting (pending or scheduled) jobs that no
    live worker can claim, one entry per (actor, queue) sorted by both, each
    with its count and a ``StrandedReason``. A worker is live when it was seen
    (registered or heartbeat) within ``stale_after`` before ``now``; it can
    claim a job when its ``actors`` hold the job's actor and its ``queues`` the
    job's queue. The reason: ``QUEUE_NOT_CONSUMED`` when some live worker
    registers the actor, else ``NO_LIVE_WORKER`` when the actor has an
    actor_config row, else ``UNREGISTERED``. With ``queues``, only jobs on
    those queues are read.

    ``queue_depths`` reports one ``QueueDepth`` per non-empty active (queue,
    status), sorted by both, with its exact count and the earliest
    ``scheduled_at`` of its jobs; terminal statuses are never read (a
    finished row costs the read nothing, however many wait to be pruned).
    The leader samples it for the queue-depth gauges; it must stay cheap.
    """

    async def get(self, job_id: int) -> Job | None: ...

    async def attempts(self, job_id: int) -> list[AttemptRecord]: ...

    async def count_active(self, queues: Sequence[str] | None = None) -> int: ...

    async def queue_depths(self) -> list[QueueDepth]: ...

    async def stranded_actors(
        self,
        queues: Sequence[str] | None = None,
        *,
        stale_after: timedelta,
        now: datetime | None = None,
    ) -> list[StrandedJobs]: ...


class JobCanceller(Protocol):
    """Cancel requests from the API side.

    A pending or scheduled job becomes cancelled at once. A running job gets
    cancel phase COOPERATIVE (and ``cancel_requested_at``) if it had NONE;
    its worker's heartbeat picks it up. A finished job is left as it is.
    Returns the job's status after the request; raises ``JobNotFound``.
    """

    async def request_cancel(self, job_id: int, *, now: datetime | None = None) -> JobStatus: ...


class LeaseJanitor(Protocol):
    """The leader's frequent sweeps.

    - ``promote_scheduled``: scheduled jobs with ``scheduled_at <= now``
      become pending; returns how many.
    - ``reclaim_expired``: running jobs whose lock expired before ``now``
      (their worker died). One with no start on record (``started_at``
      empty) goes back to pending where it was in line (``scheduled_at``
      kept) with its attempt refunded (``attempt - 1``), no attempt record,
      and ``metadata["reclaimed_unstarted"]`` counted up by one (a worker
      then marks it started before it runs it); one that started goes back
      to pending with the attempt counted, or to crashed when
      ``max_attempts`` is reached (a ``crashed`` or ``lease_expired``
      attempt record keeping the attempt's ``started_at``); either ends
      cancelled instead when a cancel was requested. The next claim issues
      a new fencing token.
    - ``time_to_lease_expiry``: how long after ``now`` the earliest lock of a
      running job expires (``min(lock_expires_at) - now``), None when no job
      is running. Negative once that lock has expired, so ``reclaim_expired``
      at ``now`` takes the job; zero or more while it holds. With ``now``
      None both ends are on the store's clock (the database's, on Postgres),
      so a caller sleeping that long never compares its own clock with the
      leases. Read-only: it changes nothing and takes no row locks.
    - ``fail_past_deadline``: pending/scheduled jobs whose schedule_to_close
      passed become failed with ``DeadlineExceeded``.
    - ``cleanup_stale_workers``: removes workers not seen for ``stale_after``.
    """

    async def promote_scheduled(self, *, now: datetime | None = None) -> int: ...

    async def reclaim_expired(self, *, now: datetime | None = None) -> ReclaimReport: ...

    async def time_to_lease_expiry(self, *, now: datetime | None = None) -> timedelta | None: ...

    async def fail_past_deadline(self, *, now: datetime | None = None) -> list[int]: ...

    async def cleanup_stale_workers(
        self, *, stale_after: timedelta, now: datetime | None = None
    ) -> list[str]: ...


class RetentionJanitor(Protocol):
    """The leader's daily sweeps: archive, archive expiry, result expiry."""

    async def prune(self, policy: PrunePolicy) -> int: ...

    async def expire_archive(self, *, now: datetime | None = None) -> int: ...

    async def expire_results(self, *, now: datetime | None = None) -> int: ...


class ActorConfigAdmin(Protocol):
    """actor_config rows.

    ``sync_actor_configs`` creates missing rows (seeding capacity from the
    literal), never overwrites stored capacity (reports differences as
    overrides), and on structural drift raises ``ActorConfigDriftList``
    unless ``force`` (then overwrites and reports). Atomic under concurrent
    syncs.
    """

    async def sync_actor_configs(
        self, configs: Sequence[ActorConfig], *, force: bool = False
    ) -> ActorConfigSyncReport: ...

    async def get_actor_config(self, actor: str) -> ActorConfig | None: ...

    async def list_actor_configs(self) -> list[ActorConfig]: ...

    async def set_actor_capacity(self, update: CapacityUpdate) -> ActorConfig: ...


class QueueAdmin(Protocol):
    """Queue dispatch modes; a queue with no row is strict FIFO.

    ``set_queue_mode`` refuses (``ValueError``) an empty queue name, one longer than
    ``MAX_NAME_LENGTH`` or text no store can keep.
    """

    async def set_queue_mode(self, queue: str, mode: QueueMode) -> None: ...

    async def queue_modes(self) -> dict[str, QueueMode]: ...


class JobAdmin(Protocol):
    """What an operator reads and does beyond the other roles (``taskq jobs``,
    ``taskq workers``).

    - ``list_jobs``: the jobs matching ``query`` (see ``JobQuery``), newest first
      (id descending). Like ``get``, only jobs not yet archived are read.
    - ``retry_job``: a job in ``taskq.domain.status.OPERATOR_RETRYABLE`` (failed,
      cancelled, crashed, abandoned) becomes pending at ``now`` for one more
      attempt: its lease, start, finish, result and cancel request are cleared; its
      attempt count and attempt history are kept (the next claim is attempt + 1),
      as are ``last_error`` and its other fields. Returns the job read back after.
      Refused with ``JobNotRetryable`` (reason from
      ``taskq.domain.status.retry_refusal``) for any other status, or when another
      active job of the actor holds its identity key; ``JobNotFound`` when unknown.
      Atomic: of concurrent retries of one job exactly one succeeds, the others
      find it pending and are refused; a running job is never touched.
    - ``worker_status``: every registered worker (``list_workers`` order) with
      whether it is the maintenance leader and how many running jobs it holds.
    """

    async def list_jobs(self, query: JobQuery) -> list[Job]: ...

    async def retry_job(self, job_id: int, *, now: datetime | None = None) -> Job: ...

    async def worker_status(self) -> list[WorkerStatus]: ...


class WorkerStore(
    JobEnqueuer,
    JobClaimer,
    JobFinisher,
    WorkerRegistry,
    JobReader,
    JobCanceller,
    LeaseJanitor,
    RetentionJanitor,
    ActorConfigAdmin,
    QueueAdmin,
    Protocol,
):
    """What a worker needs of the store: every role but the operator's ``JobAdmin``.

    A custom store written before ``JobAdmin`` existed still runs workers; only the
    operator commands (``taskq jobs``, ``taskq workers``) need the rest.
    ``capabilities`` lists ``store_params.CAP_*`` it supports.
    """

    @property
    def capabilities(self) -> frozenset[str]: ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...


class QueueStore(WorkerStore, JobAdmin, Protocol):
    """The whole store: what a worker needs plus the operator's ``JobAdmin``."""
