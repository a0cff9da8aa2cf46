"""Which write path a batch of new jobs takes, and what its statements are sent.

Pure: no driver, no I/O, so every decision here is tested without a database
(``tests/unit/adapters/test_enqueue_plan.py``); :mod:`.enqueue` runs the plan on
a connection. The paths, cheapest first:

- :attr:`Path.BARE` / :attr:`Path.SINGLE`: one job without keys or max_pending
  (the usual single enqueue), one ``insert_job_bare`` (no optional column set,
  database clock: fewer parameters to bind) or ``insert_job`` statement.
- :attr:`Path.BATCH`: a batch without keys or max_pending, one ``insert_jobs``
  statement (the array expansion costs the server more than the insert, hence
  the single-job statements above).
- :attr:`Path.COPY`: such a batch of :data:`COPY_MIN_JOBS` or more, written by
  ``COPY`` (about half the server's work per row): ``reserve_job_ids`` checks the
  same gate and takes the ids, the rows are copied (all or nothing), then
  ``wake_queue`` sends the batch's one wake-up.
- :attr:`Path.KEYED`: one job with keys, one ``insert_job_keyed`` statement
  (stored match, else insert ``ON CONFLICT DO NOTHING``). Losing a race to a
  concurrent insert of the same key returns neither row (:attr:`Miss.RACED`):
  the statement is simply run again and then finds the winner.
- :attr:`Path.LOOKUP`: a batch with keys, ``enqueue_lookup`` reads the stored
  matches, :func:`apply_rules` runs the per-job rules in input order (later jobs
  see earlier ones), then one plain ``insert_jobs`` writes the new rows.
- :attr:`Path.LOCKED`: any max_pending (a job's literal, or a stored value any
  other path ran into: :attr:`Miss.LIMITED`), transaction-scoped advisory locks
  per actor (:func:`max_pending_lock_keys`), then lookup + rules + insert under
  them, so concurrent enqueuers never overshoot.

The statements without the lock see a stored max_pending themselves and then
write nothing; the run falls back to :attr:`Path.LOCKED`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from operator import attrgetter
from typing import Any, Final

from taskq.adapters.postgres.driver import Row
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store.base import LockBudgets
from taskq.adapters.postgres.store.rows import dump_json, dump_json_object, plain_object
from taskq.domain.errors import (
    EnqueueRefused,
    IdempotencyKeyLockTimeoutError,
    MaxPendingExceeded,
    UniqueForLockTimeoutError,
)
from taskq.domain.job import NewJob, UniformJobs

#: The smallest plain batch written by COPY: below it the extra round trips
#: (ids first, the wake-up after) cost more than COPY saves the server.
COPY_MIN_JOBS: Final = 200


class Path(Enum):
    """A write path: the statements one attempt at a batch runs."""

    BARE = "insert_job_bare"
    SINGLE = "insert_job"
    BATCH = "insert_jobs"
    COPY = "reserve_job_ids + COPY + wake_queue"
    KEYED = "insert_job_keyed"
    LOOKUP = "enqueue_lookup + insert_jobs"
    LOCKED = "lock_max_pending + enqueue_lookup + insert_jobs"


class Miss(Enum):
    """Why an attempt wrote nothing."""

    LIMITED = "a max_pending applies: take the locked path"
    RACED = "lost a race on a key: run again"


def choose_path(jobs: Sequence[NewJob], *, clock_given: bool, limited: bool = False) -> Path:
    """The cheapest path that keeps every rule for non-empty ``jobs``.

    ``clock_given``: the caller stamps the enqueue time (``now``); ``limited``: a
    stored max_pending is known to apply, so straight to the locked path.
    """
    if limited:
        return Path.LOCKED
    if len(jobs) == 1 and is_plain(jobs[0]):  # the usual single enqueue, checked first
        return single_path(jobs[0], clock_given=clock_given)
    options = options_of(jobs)
    if any(j.max_pending is not None for j in options):
        return Path.LOCKED
    if not any(is_keyed(j) for j in options):  # a batch: a single one is plain (above)
        return Path.COPY if len(jobs) >= COPY_MIN_JOBS else Path.BATCH
    return Path.KEYED if len(jobs) == 1 else Path.LOOKUP


def single_path(job: NewJob, *, clock_given: bool) -> Path:
    """The statement of one plain job (:func:`is_plain`): bare when it sets no optional
    column and the database clock stamps it."""
    return Path.BARE if not clock_given and is_bare(job) else Path.SINGLE


# --- what a job sets ------------------------------------------------------------------


def is_keyed(job: NewJob) -> bool:
    return job.identity_key is not None or job.idempotency_key is not None


def is_plain(job: NewJob) -> bool:
    """No keys and no max_pending literal: ``insert_job`` can write it alone."""
    return job.identity_key is None and job.idempotency_key is None and job.max_pending is None


def is_bare(job: NewJob) -> bool:
    """No optional column set: ``insert_job_bare`` leaves them all to their defaults."""
    return (
        untimed(job)
        and job.fairness_key is None
        and not job.metadata
        and not job.tags
        and job.trace_id is None
        and job.span_id is None
    )


def untimed(job: NewJob) -> bool:
    """No time option set (schedule, deadline, attempt timeout): nothing for
    :func:`present_columns` to check."""
    return (
        job.scheduled_at is None and job.schedule_to_close is None and job.attempt_timeout is None
    )


def present_columns(jobs: Sequence[NewJob]) -> frozenset[str]:
    """The optional columns some job sets (the others travel as NULL); checks timestamps.

    One pass over the batch: naive datetimes fail here (like a naive comparison
    would), before anything is written.
    """
    present: set[str] = set()
    for job in jobs:
        if job.scheduled_at is not None:
            present.add("scheduled_at")
            if job.scheduled_at.tzinfo is None:
                raise TypeError(f"NewJob.scheduled_at must be timezone-aware: {job.scheduled_at!r}")
        if job.schedule_to_close is not None:
            present.add("schedule_to_close")
            if job.schedule_to_close.tzinfo is None:
                raise TypeError(
                    f"NewJob.schedule_to_close must be timezone-aware: {job.schedule_to_close!r}"
                )
        if job.attempt_timeout is not None:
            present.add("attempt_timeout")
        if job.fairness_key is not None:
            present.add("fairness_key")
        if job.identity_key is not None:
            present.add("identity_key")
        if job.idempotency_key is not None:
            present.add("idempotency_key")
        if job.trace_id is not None:
            present.add("trace_id")
        if job.span_id is not None:
            present.add("span_id")
    return frozenset(present)


def options_of(jobs: Sequence[NewJob]) -> Sequence[NewJob]:
    """Jobs whose options are the batch's: a uniform batch's are its template's, read once."""
    return [jobs.template] if isinstance(jobs, UniformJobs) else jobs


def listed(jobs: Sequence[NewJob]) -> list[NewJob]:
    """The jobs as the per-job paths take them (a list already is one; no copy)."""
    return jobs if isinstance(jobs, list) else list(jobs)


def wake_queue(jobs: Sequence[NewJob]) -> str:
    """The queue to wake: the one all jobs share, else "" (any queue)."""
    if isinstance(jobs, UniformJobs):
        return jobs.template.queue
    queues = {j.queue for j in jobs}
    return queues.pop() if len(queues) == 1 else ""


# --- locks ----------------------------------------------------------------------------


def key_budget(jobs: Sequence[NewJob], budgets: LockBudgets) -> float | None:
    """The lock budget (ms) of an insert that may wait on a key index; None when none can."""
    spent = []
    if any(j.identity_key is not None for j in jobs):
        spent.append(budgets.unique_ms)
    if any(j.idempotency_key is not None for j in jobs):
        spent.append(budgets.idempotency_ms)
    if not spent:
        return None
    return 0.0 if any(b <= 0 for b in spent) else max(spent)


def key_refusal(jobs: Sequence[NewJob], message: str) -> EnqueueRefused:
    """The lock-timeout refusal naming the key a statement over ``jobs`` waited for."""
    if any(j.identity_key is not None for j in jobs):
        return UniqueForLockTimeoutError(message)
    return IdempotencyKeyLockTimeoutError(message)


def max_pending_lock_keys(jobs: Sequence[NewJob], schema: Schema) -> list[str]:
    """The locked path's advisory-lock keys: one per actor, sorted so that concurrent
    enqueuers take them in one order."""
    return sorted({schema.lock_key(f"max_pending:{j.actor}") for j in jobs})


# --- the per-job rules ----------------------------------------------------------------

# A job's outcome while the rules run: a stored id, or the index of a row to insert.
Ref = tuple[bool, int]  # (is_new, stored id or insert index)


@dataclass(slots=True)
class Lookup:
    """What ``enqueue_lookup`` found: stored keys, waiting counts, stored max_pending."""

    idempotency: dict[tuple[str, str], Ref]
    identity: dict[tuple[str, str], Ref]
    waiting: dict[str, int]
    stored_max_pending: dict[str, int | None]

    @classmethod
    def of(cls, rows: Iterable[Row]) -> Lookup:
        lookup = cls({}, {}, {}, {})
        for row in rows:
            kind = row["kind"]
            if kind == "idempotency":
                lookup.idempotency[(row["actor"], row["key"])] = (False, row["id"])
            elif kind == "identity":
                lookup.identity[(row["actor"], row["key"])] = (False, row["id"])
            else:
                lookup.waiting[row["actor"]] = row["waiting"] or 0
                lookup.stored_max_pending[row["actor"]] = row["max_pending"]
        return lookup

    def limited(self) -> bool:
        """Some actor has a stored max_pending: only the locked path may insert."""
        return any(v is not None for v in self.stored_max_pending.values())


def lookup_params(batch: Sequence[NewJob], *, count_waiting: bool) -> dict[str, Any]:
    """``enqueue_lookup``'s parameters: the keyed jobs' keys and every actor."""
    keyed = [j for j in batch if is_keyed(j)]
    return {
        "key_actor": [j.actor for j in keyed],
        "identity_key": [j.identity_key for j in keyed],
        "idempotency_key": [j.idempotency_key for j in keyed],
        "actors": sorted({j.actor for j in batch}),
        "count_waiting": count_waiting,
    }


def apply_rules(
    batch: Sequence[NewJob], lookup: Lookup, *, enforce_limits: bool
) -> tuple[list[tuple[Ref, bool]], list[NewJob]]:
    """The per-job rules in input order, exactly as the memory adapter applies them.

    Returns each job's outcome (a stored id or an insert index, and whether it
    is an existing job) and the jobs to insert; updates ``lookup`` with them.
    Raises ``MaxPendingExceeded`` for the first job over its actor's limit.
    """
    refs: list[tuple[Ref, bool]] = []
    to_insert: list[NewJob] = []
    for job in batch:
        idem = None if job.idempotency_key is None else (job.actor, job.idempotency_key)
        ident = None if job.identity_key is None else (job.actor, job.identity_key)
        if idem is not None and idem in lookup.idempotency:
            refs.append((lookup.idempotency[idem], True))
            continue
        if ident is not None and ident in lookup.identity:
            refs.append((lookup.identity[ident], True))
            continue
        if enforce_limits:
            stored = lookup.stored_max_pending.get(job.actor)
            limit = stored if stored is not None else job.max_pending
            if limit is not None and lookup.waiting.get(job.actor, 0) >= limit:
                raise MaxPendingExceeded(job.actor, limit)
        ref: Ref = (True, len(to_insert))
        to_insert.append(job)
        lookup.waiting[job.actor] = lookup.waiting.get(job.actor, 0) + 1
        if idem is not None:
            lookup.idempotency[idem] = ref
        if ident is not None:
            lookup.identity[ident] = ref
        refs.append((ref, False))
    return refs, to_insert


# --- statement parameters -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Documents:
    """A batch's JSON columns, each one JSON array with an element per job.

    One document per column is one C-level encode here and one parse on the
    server, instead of one per job. ``metadata``/``tags`` are ``None`` when
    no job sets them (the column defaults apply). Encoding them is also the
    validation: a value JSON cannot hold fails before anything is written.
    """

    payloads: str
    metadata: str | None
    tags: str | None

    @classmethod
    def of(cls, jobs: Sequence[NewJob]) -> Documents:
        return cls(
            payloads=dump_json([plain_object(j.payload) for j in jobs]),
            metadata=(
                dump_json([plain_object(j.metadata) for j in jobs])
                if any(j.metadata for j in jobs)
                else None
            ),
            tags=dump_json([list(j.tags) for j in jobs]) if any(j.tags for j in jobs) else None,
        )


def _optional(jobs: Sequence[NewJob], name: str, present: frozenset[str]) -> list[Any] | None:
    """A batch column of an optional field; ``None`` (all NULL) when no job sets it."""
    if name not in present:
        return None
    get = attrgetter(name)
    return [get(j) for j in jobs]


def insert_jobs_params(
    jobs: Sequence[NewJob],
    now: datetime | None,
    *,
    check_limits: bool,
    lock_timeout: str | None,
) -> dict[str, Any]:
    """``insert_jobs``'s parameters but the wake channel; its ``wake_queue`` is the
    queue the statement wakes."""
    present = present_columns(jobs)
    documents = Documents.of(jobs)
    return {
        "now": now,
        "lock_timeout": lock_timeout,
        "check_limits": check_limits,
        "limit_actors": sorted({j.actor for j in jobs}),
        "queue": [j.queue for j in jobs],
        "actor": [j.actor for j in jobs],
        "payloads": documents.payloads,
        "priority": [j.priority for j in jobs],
        "max_attempts": [j.max_attempts for j in jobs],
        "scheduled_at": _optional(jobs, "scheduled_at", present),
        "schedule_to_close": _optional(jobs, "schedule_to_close", present),
        "fairness_key": _optional(jobs, "fairness_key", present),
        "identity_key": _optional(jobs, "identity_key", present),
        "idempotency_key": _optional(jobs, "idempotency_key", present),
        "metadata": documents.metadata,
        "tags": documents.tags,
        "trace_id": _optional(jobs, "trace_id", present),
        "span_id": _optional(jobs, "span_id", present),
        "attempt_timeout": _optional(jobs, "attempt_timeout", present),
        "wake_queue": wake_queue(jobs),
    }


def insert_job_params(job: NewJob, now: datetime | None, *, bare: bool) -> dict[str, Any]:
    """The parameters of ``insert_job_bare`` (``bare``) or ``insert_job`` but the channel."""
    if bare:
        return {
            "queue": job.queue,
            "actor": job.actor,
            "payload": dump_json_object(job.payload),
            "priority": job.priority,
            "max_attempts": job.max_attempts,
        }
    return {
        "now": now,
        "queue": job.queue,
        "actor": job.actor,
        "payload": dump_json_object(job.payload),
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "scheduled_at": job.scheduled_at,
        "schedule_to_close": job.schedule_to_close,
        "fairness_key": job.fairness_key,
        "metadata": dump_json_object(job.metadata),
        "tags": list(job.tags),
        "trace_id": job.trace_id,
        "span_id": job.span_id,
        "attempt_timeout": job.attempt_timeout,
    }


def insert_keyed_params(
    job: NewJob, now: datetime | None, *, lock_timeout: str | None
) -> dict[str, Any]:
    """``insert_job_keyed``'s parameters but the wake channel."""
    return {
        "now": now,
        "lock_timeout": lock_timeout,
        "queue": job.queue,
        "actor": job.actor,
        "payload": dump_json_object(job.payload),
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "scheduled_at": job.scheduled_at,
        "schedule_to_close": job.schedule_to_close,
        "fairness_key": job.fairness_key,
        "identity_key": job.identity_key,
        "idempotency_key": job.idempotency_key,
        "metadata": dump_json_object(job.metadata),
        "tags": dump_json(list(job.tags)) if job.tags else None,
        "trace_id": job.trace_id,
        "span_id": job.span_id,
        "attempt_timeout": job.attempt_timeout,
    }


__all__ = [
    "COPY_MIN_JOBS",
    "Documents",
    "Lookup",
    "Miss",
    "Path",
    "Ref",
    "apply_rules",
    "choose_path",
    "insert_job_params",
    "insert_jobs_params",
    "insert_keyed_params",
    "is_bare",
    "is_keyed",
    "is_plain",
    "key_budget",
    "key_refusal",
    "listed",
    "lookup_params",
    "max_pending_lock_keys",
    "options_of",
    "present_columns",
    "single_path",
    "untimed",
    "wake_queue",
]
