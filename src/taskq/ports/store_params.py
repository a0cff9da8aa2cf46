"""Parameter and result types of the QueueStore port.

Every ``now`` is optional: when None the adapter uses its own time source
(the database clock, or the memory adapter's clock); tests pass it to assert
exact timestamps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.job import JSON, Lease
from taskq.domain.status import JobStatus
from taskq.domain.storable import (
    capacity_count_problem,
    check_texts,
    result_ttl_problem,
    storable_text,
    text_problem,
)

#: Capabilities an adapter may declare in ``QueueStore.capabilities``.
CAP_LISTEN_NOTIFY = "listen_notify"
CAP_ADVISORY_LOCKS = "advisory_locks"
CAP_DURABLE = "durable"
CAP_TRANSACTIONAL_ENQUEUE = "transactional_enqueue"
CAP_MULTI_PROCESS = "multi_process"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRequest:
    """Claim up to ``limit`` due pending jobs for ``worker_id``.

    Only jobs on ``queues`` whose actor is in ``actors`` are eligible. Each
    claimed job is locked until ``now + lease``. The first ``start_now`` jobs
    claimed (in dispatch order) are marked started by the claim itself
    (``started_at = now``, ``ClaimedJob.started``): consumers are waiting for
    them. The rest are claimed unstarted and run only after a start mark.
    """

    worker_id: str
    queues: Sequence[str]
    actors: Sequence[str]
    limit: int
    lease: timedelta
    start_now: int = 0
    now: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Finish:
    """A terminal write by the owner of ``lease``.

    ``status`` is one of succeeded, failed, cancelled, abandoned, crashed.
    ``result_ttl`` is the actor literal; a stored ``actor_config.result_ttl``
    wins over it. The result expires ``result_ttl`` after ``now``; no TTL
    keeps it until the job is pruned; an expiry past what the store holds
    raises ``ValueError`` and ``finish_many`` writes none of its batch.
    ``started_ago`` (how long before ``now`` the attempt began) fills
    ``started_at`` when no start mark landed; a landed mark is kept.
    ``traceback`` is stored with the attempt (its history), not on the job.
    A succeeded write clears the job's ``last_error`` and ``error_class``
    (an earlier attempt's error stays in the history).
    """

    lease: Lease
    status: JobStatus
    result: JSON = None
    error: str | None = None
    error_class: str | None = None
    traceback: str | None = None
    result_ttl: timedelta | None = None
    started_ago: timedelta | None = None
    now: datetime | None = None

    def __post_init__(self) -> None:
        _check_started_ago(self.started_ago)
        _escape_error_text(self)

    def restamped(self, started_ago: timedelta) -> Finish:
        """This write with ``started_ago`` measured again.

        A plain copy (``dataclasses.replace`` costs twice as much, and every
        terminal write of a worker goes through here); only the new value
        needs the constructor's check.
        """
        _check_started_ago(started_ago)
        copy = object.__new__(Finish)
        for name in _FINISH_FIELDS:
            object.__setattr__(copy, name, getattr(self, name))
        object.__setattr__(copy, "started_ago", started_ago)
        return copy


_FINISH_FIELDS: Final = tuple(f.name for f in fields(Finish))


@dataclass(frozen=True, slots=True, kw_only=True)
class Reschedule:
    """Put the owner's running job back to wait until ``run_at``.

    Used for retries, snoozes and releases. ``refund_attempt`` undoes the
    attempt increment of the claim (a snooze, a ``RetryAfter`` that does not
    consume budget, a release). ``snooze`` increments ``metadata.snooze_count``.
    A ``run_at`` not after ``now`` makes the job pending at once; otherwise scheduled.
    """

    lease: Lease
    run_at: datetime
    refund_attempt: bool = False
    snooze: bool = False
    error: str | None = None
    error_class: str | None = None
    #: As on :class:`Finish`: stored with the attempt.
    traceback: str | None = None
    #: As on :class:`Finish`: fills an unmarked ``started_at``.
    started_ago: timedelta | None = None
    now: datetime | None = None

    def __post_init__(self) -> None:
        _check_started_ago(self.started_ago)
        _escape_error_text(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerInfo:
    worker_id: str
    hostname: str
    pid: int
    queues: Sequence[str]
    actors: Sequence[str] = ()
    worker_label: str | None = None
    workgroup_instance: str | None = None

    def __post_init__(self) -> None:
        # Text no store can keep is refused here, by every adapter alike.
        check_texts(
            "WorkerInfo",
            worker_id=self.worker_id,
            hostname=self.hostname,
            queues=self.queues,
            actors=self.actors,
            worker_label=self.worker_label,
            workgroup_instance=self.workgroup_instance,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerRecord:
    worker_id: str
    hostname: str
    pid: int
    queues: tuple[str, ...]
    started_at: datetime
    last_seen_at: datetime
    worker_label: str | None = None
    workgroup_instance: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerStatus:
    """A registered worker as an operator sees it (``JobAdmin.worker_status``).

    ``is_leader``: the maintenance-leader record names it (the worker that last
    heartbeated as leader). ``jobs_held``: the running jobs locked by it.
    """

    worker: WorkerRecord
    is_leader: bool
    jobs_held: int


#: The most jobs one ``JobAdmin.list_jobs`` call returns.
JOB_QUERY_LIMIT_MAX: Final = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class JobQuery:
    """Which jobs ``JobAdmin.list_jobs`` returns: those matching every filter given
    (None: any), newest first, at most ``limit`` (1 to ``JOB_QUERY_LIMIT_MAX``)."""

    status: JobStatus | None = None
    actor: str | None = None
    queue: str | None = None
    limit: int = 50

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= JOB_QUERY_LIMIT_MAX:
            raise ValueError(f"limit must be 1..{JOB_QUERY_LIMIT_MAX}, got {self.limit}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    """One heartbeat of ``worker_id``: liveness, lease extension, cancel poll.

    Leases in ``let_lapse`` (matched with their fencing tokens) are reported
    but not extended: jobs the worker ran and could not write an outcome for,
    left to expire so the leader's sweep reclaims them.

    ``timeout`` is how long the caller means to wait for the answer (None: no
    bound; zero or less is refused with ``ValueError``). An adapter that can tell
    what a call waits for ends the call after it with a
    :class:`~taskq.domain.errors.StoreTimeout` whose ``waited_for`` says so (a
    free connection of its pool, the server's answer), so the caller's log names
    the cause; one that cannot may let it pass (the caller bounds the call itself).
    """

    worker_id: str
    lease: timedelta
    is_leader: bool = False
    now: datetime | None = None
    let_lapse: tuple[Lease, ...] = ()
    timeout: timedelta | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningJobView:
    """A running job the heartbeat found owned by the worker."""

    lease: Lease
    cancel_phase: CancelPhase
    cancel_requested_at: datetime | None
    started: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatReport:
    """Every running job the worker still owns (``WorkerRegistry`` says which leases the
    heartbeat extended).

    ``registered`` is False when the worker's ``workers`` row was gone (a stale
    worker sweep removed it while the process was paused): the worker registers again.
    """

    running: tuple[RunningJobView, ...] = ()
    registered: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Isolation:
    """Hand back every running job of a worker that is stopping without its consumers'
    help (isolate-self after failed heartbeats, a hard exit, a watchdog trip).

    Per job: never started → pending again, attempt refunded, no attempt row
    (it never ran); started, actor in ``retryable_actors`` → waiting until
    ``retry_at``, attempt refunded (the interruption is not the job's failure),
    an ``interrupted`` attempt row; started, any other actor → ``crashed`` (a
    non-retryable job never runs twice), a ``crashed`` attempt row. A job whose
    cancel was requested ends ``cancelled`` instead of waiting. Attempt rows
    carry ``error_class`` and ``error`` (why the worker let go; ``error`` None:
    the isolate-self message, see :func:`isolation_error`), and keep the
    attempt's ``started_at``; a started job's ``last_error`` becomes
    ``"<error_class>: <error>"``.

    A job whose row another session holds locked (an application's ``SELECT ...
    FOR UPDATE`` or ``FOR SHARE``) is not waited for: an adapter with row locks
    skips it and leaves it running, its lease as it was, for the leader's sweep
    once that lease expired (as after a crash); it is not among the affected ids.
    """

    worker_id: str
    retryable_actors: Sequence[str]
    retry_at: datetime
    error_class: str = "HeartbeatLost"
    error: str | None = None
    now: datetime | None = None


def isolation_error(request: Isolation) -> str:
    """The message an isolation records on each attempt it ends (the default names isolate-self)."""
    if request.error is not None:
        return request.error
    return f"worker {request.worker_id} lost its heartbeat and isolated itself"


@dataclass(frozen=True, slots=True, kw_only=True)
class Interruption:
    """The owner of ``lease`` stopped the attempt for its own reasons (its shutdown, a
    timeout of the worker's, ...), not because the job failed or a user cancelled it.

    ``retryable``: the job waits again until ``run_at``, attempt refunded (an
    interrupted attempt does not count against ``max_attempts``). Otherwise it
    ends ``abandoned`` (a non-retryable job never runs twice). Either way an
    ``interrupted`` attempt row records ``error_class`` and ``error``, and the
    job's ``last_error`` becomes ``error``. A job whose cancel was requested ends
    ``cancelled`` instead.
    """

    lease: Lease
    retryable: bool
    run_at: datetime
    error_class: str
    error: str
    #: As on :class:`Finish`: fills an unmarked ``started_at``.
    started_ago: timedelta | None = None
    now: datetime | None = None

    def __post_init__(self) -> None:
        _check_started_ago(self.started_ago)
        # Written visibly escaped, as Finish's error texts are (see _escape_error_text).
        for name in ("error", "error_class"):
            text = getattr(self, name)
            if text_problem(text) is not None:
                object.__setattr__(self, name, storable_text(text))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReclaimReport:
    """Jobs whose lease expired: re-pended, crashed when attempts ran out, or cancelled
    when a cancel had been requested (they are not run again). ``unstarted`` lists
    those of them with no start on record (re-pended with their attempt refunded, or
    cancelled)."""

    repended: tuple[int, ...] = ()
    crashed: tuple[int, ...] = ()
    cancelled: tuple[int, ...] = ()
    unstarted: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PrunePolicy:
    """Move terminal jobs finished before ``now - retention[status]`` to the archive."""

    retention: Mapping[JobStatus, timedelta]
    archive_retention: timedelta
    batch_size: int = 10_000
    now: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityUpdate:
    """Operator change of capacity fields. ``clear`` names fields to set NULL."""

    actor: str
    max_concurrent: int | None = None
    max_pending: int | None = None
    result_ttl: timedelta | None = None
    clear: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        # Refused here, so every adapter refuses alike: a result_ttl past the limit
        # would make each finished job's expiry a time no reader can load.
        if self.result_ttl is not None:
            problem = result_ttl_problem(self.result_ttl)
            if problem is not None:
                raise ValueError(f"CapacityUpdate.result_ttl {problem}")
        # A count past the integer column leaked the driver's text before.
        for name in ("max_concurrent", "max_pending"):
            count = getattr(self, name)
            if count is not None and (problem := capacity_count_problem(count)) is not None:
                raise ValueError(f"CapacityUpdate.{name} {problem}")


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDepth:
    """``count`` jobs of ``queue`` in the active ``status`` (pending, scheduled or running).

    ``oldest_due_at`` is the earliest ``scheduled_at`` among them: for pending
    jobs, since when the longest-waiting one has been due (its wait is now
    minus this, the signal of a queue that stopped moving); for scheduled
    ones, when the next falls due. None only when an adapter cannot say.
    """

    queue: str
    status: JobStatus
    count: int
    oldest_due_at: datetime | None = None


class StrandedReason(StrEnum):
    """Why no live worker can claim some waiting jobs (see ``JobReader.stranded_actors``)."""

    #: The actor has no actor_config row: no worker ever registered it (or the row was removed).
    UNREGISTERED = "unregistered"
    #: Registered once (it has an actor_config row), but no live worker registers it now.
    NO_LIVE_WORKER = "no_live_worker"
    #: Live workers register the actor, but none of them consumes the jobs' queue.
    QUEUE_NOT_CONSUMED = "queue_not_consumed"


@dataclass(frozen=True, slots=True, kw_only=True)
class StrandedJobs:
    """``waiting`` pending or scheduled jobs of ``actor`` on ``queue`` that no live worker
    can claim, and why."""

    actor: str
    queue: str
    waiting: int
    reason: StrandedReason


def _escape_error_text(write: Finish | Reschedule) -> None:
    # No store can keep NUL or a lone surrogate (from bytes decoded with surrogateescape)
    # in text, and an error message is the actor's (or a payload's) words: the write must
    # land all the same, so each is written visibly escaped (\x00, \udcff).
    # Every terminal write passes here: no loop, and plain attribute reads.
    error, error_class, tb = write.error, write.error_class, write.traceback
    if error is not None and text_problem(error) is not None:
        object.__setattr__(write, "error", storable_text(error))
    if error_class is not None and text_problem(error_class) is not None:
        object.__setattr__(write, "error_class", storable_text(error_class))
    if tb is not None and text_problem(tb) is not None:
        object.__setattr__(write, "traceback", storable_text(tb))


def _check_started_ago(value: timedelta | None) -> None:
    if value is not None and value < timedelta(0):
        raise ValueError(f"started_ago must be >= 0 (a start before the write), got {value}")


def aligned_started_ago(
    leases: Sequence[Lease], started_ago: Sequence[timedelta] | None
) -> list[timedelta] | None:
    """``mark_started``'s ``started_ago``, checked: one non-negative delta per lease."""
    if started_ago is None:
        return None
    offsets = list(started_ago)
    if len(offsets) != len(leases):
        raise ValueError(
            f"started_ago needs one delta per lease: {len(offsets)} for {len(leases)} leases"
        )
    for offset in offsets:
        _check_started_ago(offset)
    return offsets
