"""Job records as the domain sees them, independent of any storage.

A *lease* is the right to write a running job's outcome. It is the pair
``(job_id, fencing_token)``; every claim issues a new fencing token, so a
worker whose lease expired and was reclaimed can never complete, retry or
cancel the job its successor now owns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, overload

from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.frozen import fast_constructor
from taskq.domain.status import JobStatus

#: JSON-compatible value (what payloads, results and metadata are made of).
JSON = Any

DEFAULT_QUEUE = "default"
NULL_COHORT = "__null__"


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob:
    """Everything needed to enqueue one job.

    ``scheduled_at`` in the future makes the job ``scheduled``; otherwise it is
    ``pending`` at once. ``max_attempts`` (``None`` = unbounded) lets the
    maintenance sweep decide between re-pending and ``crashed`` for a job whose
    worker died, without knowing the actor's policy. ``max_pending`` is the
    actor literal; a stored ``actor_config.max_pending`` overrides it.
    ``attempt_timeout`` bounds each attempt of this job, overriding the actor's
    ``timeout`` (``None``: the actor's, if it has one).
    """

    actor: str
    queue: str = DEFAULT_QUEUE
    payload: Mapping[str, JSON] = field(default_factory=dict)
    priority: int = 0
    scheduled_at: datetime | None = None
    schedule_to_close: datetime | None = None
    max_attempts: int | None = 3
    identity_key: str | None = None
    fairness_key: str | None = None
    idempotency_key: str | None = None
    metadata: Mapping[str, JSON] = field(default_factory=dict)
    tags: Sequence[str] = ()
    trace_id: str | None = None
    span_id: str | None = None
    max_pending: int | None = None
    attempt_timeout: timedelta | None = None


_NEW_JOB_FIELDS: tuple[str, ...] = tuple(NewJob.__dataclass_fields__)

#: ``NewJob(...)`` for the hot paths (one per enqueued job): the same frozen object at a
#: third of the frozen ``__init__``'s cost.
build_new_job = fast_constructor(NewJob)


def with_payload(template: NewJob, payload: Mapping[str, JSON]) -> NewJob:
    """``template`` with another payload (``dataclasses.replace`` without its checks:
    ``template`` is already a valid job)."""
    fields = {name: getattr(template, name) for name in _NEW_JOB_FIELDS}
    fields["payload"] = payload
    return build_new_job(**fields)


def with_trace_context(job: NewJob, trace_id: str, span_id: str) -> NewJob:
    """``job`` carrying another trace context (the producer span's, as W3C hex), as
    :func:`with_payload` does for payloads."""
    fields = {name: getattr(job, name) for name in _NEW_JOB_FIELDS}
    fields["trace_id"] = trace_id
    fields["span_id"] = span_id
    return build_new_job(**fields)


class UniformJobs(Sequence[NewJob]):
    """Jobs that differ only in their payloads: ``template``'s options, one payload each.

    What ``JobsClient.enqueue_many`` sends (every job of a call shares its
    options). A store may read the options once, from ``template``, instead of
    once per job; as a sequence it yields the full jobs, so any store takes it.
    ``template.payload`` is not one of the jobs' payloads unless it is in ``payloads``.
    """

    __slots__ = ("payloads", "template")

    def __init__(self, template: NewJob, payloads: Sequence[Mapping[str, JSON]]) -> None:
        self.template = template
        self.payloads = payloads

    def __repr__(self) -> str:
        return f"<UniformJobs {len(self.payloads)} x {self.template.actor}@{self.template.queue}>"

    def __len__(self) -> int:
        return len(self.payloads)

    @overload
    def __getitem__(self, index: int) -> NewJob: ...

    @overload
    def __getitem__(self, index: slice) -> UniformJobs: ...

    def __getitem__(self, index: int | slice) -> NewJob | UniformJobs:
        if isinstance(index, slice):
            return UniformJobs(self.template, self.payloads[index])
        return with_payload(self.template, self.payloads[index])

    def __iter__(self) -> Iterator[NewJob]:
        template = self.template
        for payload in self.payloads:
            yield with_payload(template, payload)


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    """The id of the enqueued job, and whether an existing job was returned.

    ``was_existing`` is true when an identity key or idempotency key matched
    a job already stored; nothing new was written then.
    """

    job_id: int
    was_existing: bool = False


#: ``EnqueueResult(...)`` for the hot paths (one per job of a bulk enqueue), as ``build_new_job``.
build_enqueue_result = fast_constructor(EnqueueResult)


@dataclass(frozen=True, slots=True)
class Lease:
    """The right to write a running job's outcome: job id plus fencing token."""

    job_id: int
    fencing_token: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A stored job, as read back from any adapter."""

    id: int
    queue: str
    actor: str
    payload: Mapping[str, JSON]
    status: JobStatus
    priority: int
    attempt: int
    max_attempts: int | None
    fencing_token: int
    created_at: datetime
    scheduled_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    locked_by: str | None
    lock_expires_at: datetime | None
    cancel_phase: CancelPhase
    cancel_requested_at: datetime | None
    schedule_to_close: datetime | None
    identity_key: str | None
    fairness_key: str | None
    idempotency_key: str | None
    metadata: Mapping[str, JSON]
    tags: tuple[str, ...]
    result: JSON
    result_expires_at: datetime | None
    last_error: str | None
    trace_id: str | None
    span_id: str | None
    #: The job's own attempt timeout (its enqueue's ``timeout``), else None.
    attempt_timeout: timedelta | None = None

    @property
    def snooze_count(self) -> int:
        value = self.metadata.get("snooze_count", 0)
        return value if isinstance(value, int) else 0

    @property
    def lease(self) -> Lease:
        return Lease(self.id, self.fencing_token)


#: Metadata key the reclaim sweep counts in: lapsed leases of a job with no start mark
#: (its worker died before starting it, or within a moment of starting it).
RECLAIMED_UNSTARTED: Final = "reclaimed_unstarted"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedJob:
    """A job a worker has just claimed. ``attempt`` is the attempt now starting."""

    id: int
    queue: str
    actor: str
    payload: Mapping[str, JSON]
    priority: int
    attempt: int
    max_attempts: int | None
    fencing_token: int
    scheduled_at: datetime
    lock_expires_at: datetime
    schedule_to_close: datetime | None
    fairness_key: str | None
    metadata: Mapping[str, JSON]
    trace_id: str | None
    span_id: str | None
    #: Why the stored payload or metadata could not be read (written by other means than
    #: TaskQ: not a JSON object, nested past what the decoder takes), else None. The
    #: worker fails such a job without running it, instead of failing its whole claim.
    unreadable: str | None = None
    #: The claim itself marked it started (``ClaimRequest.start_now``): a consumer was
    #: waiting for it. Otherwise it runs only after ``JobClaimer.mark_started`` held.
    started: bool = False
    #: How long one attempt of this job may run, when its enqueue said (it overrides the
    #: actor's ``timeout``); None: the actor's bound, if any.
    attempt_timeout: timedelta | None = None

    @property
    def lease(self) -> Lease:
        return Lease(self.id, self.fencing_token)

    @property
    def snooze_count(self) -> int:
        value = self.metadata.get("snooze_count", 0)
        return value if isinstance(value, int) else 0

    @property
    def reclaimed_unstarted(self) -> int:
        """How often a dead worker's lease of it lapsed with no start on record."""
        value = self.metadata.get(RECLAIMED_UNSTARTED, 0)
        return value if isinstance(value, int) else 0


#: ``ClaimedJob(...)`` for the hot path (one per claimed job), as ``build_new_job``.
build_claimed_job = fast_constructor(ClaimedJob)


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    """One row of a job's attempt history.

    ``outcome`` says how the attempt ended: the terminal status's value
    (``succeeded``, ``failed``, ``cancelled``, ``abandoned``, ``crashed``),
    ``retried`` or ``snoozed`` (a reschedule), ``released`` (given back
    unrun), ``lease_expired`` (its worker died; reclaimed by the sweep) or
    ``interrupted`` (its worker stopped it for its own reasons: a shutdown,
    isolate-self, a hard exit; ``error_class`` says which). The contract suite
    pins these names.

    ``started_at`` is when the attempt began (None when no start was
    recorded: a job given back unrun, or ended before its start mark landed).
    ``traceback`` is the failed attempt's traceback, size-bounded and without
    local variables (None when the attempt raised nothing, or the error had
    none to tell).
    """

    job_id: int
    attempt: int
    worker_id: str | None
    outcome: str
    error_class: str | None
    error: str | None
    finished_at: datetime
    started_at: datetime | None = None
    traceback: str | None = None


#: Job ids are Postgres bigints: no job has an id outside this range.
JOB_ID_MIN: Final = -(2**63)
JOB_ID_MAX: Final = 2**63 - 1


def job_id_can_exist(job_id: object) -> bool:
    """Whether a job may have ``job_id`` (False outside the bigint range: a read finds
    nothing); ``TypeError`` when it is not an int at all."""
    if not isinstance(job_id, int) or isinstance(job_id, bool):
        raise TypeError(f"job_id must be an int, got {type(job_id).__name__} {job_id!r}")
    return JOB_ID_MIN <= job_id <= JOB_ID_MAX
