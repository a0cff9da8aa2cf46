"""JobEnqueuer on Postgres: the cheapest path that can keep every rule.

- No keys, no max_pending (the bulk case): one ``insert_jobs`` statement for the
  whole batch, which inserts nothing when a stored max_pending turns out to
  apply (then the locked path runs). A batch of exactly one such job runs
  ``insert_job`` instead: the same rules without the array expansion, which
  costs the server more than the insert itself (``insert_job_bare`` when the
  job sets no optional column: fewer parameters to bind). A batch of
  :data:`COPY_MIN_JOBS` or more is written by ``COPY`` instead, about half
  the server's work per row: ``reserve_job_ids`` checks the same gate and
  takes the ids, the rows are copied (one statement, all or nothing), then
  ``wake_queue`` sends the batch's one wake-up.
- One job with keys: one ``insert_job_keyed`` statement (stored match, else
  insert ``ON CONFLICT DO NOTHING``). Losing a race to a concurrent insert of
  the same key returns neither row; the statement is simply run again and then
  finds the winner.
- A batch with keys: ``enqueue_lookup`` reads the stored matches, the per-job
  rules run here in input order (later jobs see earlier ones), then one plain
  ``insert_jobs`` writes the new rows; a unique violation (a race) re-runs it.
- Any max_pending (the job's literal or a stored value): a transaction takes
  transaction-scoped advisory locks per actor (keys carry the schema; bounded by
  the max_pending budget), then does lookup + rules + insert under them, so
  concurrent enqueuers never overshoot.

Every statement that can wait for a lock runs with a transaction-local
``lock_timeout`` from :class:`LockBudgets`. Each insert statement sends at most
one wake-up, delivered when it commits; the store's own (autocommit) enqueues
share wake-ups through its :class:`WakeGate`, so concurrent enqueuers do not
serialise on NOTIFY's commit lock. A bound enqueuer (the caller's own
connection and transaction) runs each attempt in a savepoint so a lost race
never aborts the caller's transaction, and gives ``lock_timeout`` back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from operator import attrgetter
from typing import Any, Final, cast

from taskq.adapters.postgres.call_budget import CallBudget, active_budget
from taskq.adapters.postgres.driver import (
    Driver,
    LockTimeout,
    Row,
    TransientConflict,
    UniqueConflict,
)
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store.base import (
    CONFLICT_RETRIES,
    LockBudgets,
    budget_lock_timeout,
    call_timeout_of,
)
from taskq.adapters.postgres.store.enqueue_copy import copy_chunks, plan_copy
from taskq.adapters.postgres.store.rows import (
    check_aware,
    dump_json,
    dump_json_object,
    plain_object,
)
from taskq.adapters.postgres.store.wake_gate import WakeGate
from taskq.domain.errors import (
    EnqueueRefused,
    IdempotencyKeyLockTimeoutError,
    MaxPendingExceeded,
    MaxPendingLockTimeoutError,
    StoreTimeout,
    StoreUnavailable,
    UniqueForLockTimeoutError,
)
from taskq.domain.job import JSON, EnqueueResult, NewJob, UniformJobs, build_enqueue_result


class _Miss(Enum):
    """Why an attempt wrote nothing."""

    LIMITED = "a max_pending applies: take the locked path"
    RACED = "lost a race on a key: run again"


_LIMITED: Final = _Miss.LIMITED
_RACED: Final = _Miss.RACED

#: The smallest plain batch written by COPY: below it the extra round trips
#: (ids first, the wake-up after) cost more than COPY saves the server.
COPY_MIN_JOBS: Final = 200


def _is_keyed(job: NewJob) -> bool:
    return job.identity_key is not None or job.idempotency_key is not None


def _is_plain(job: NewJob) -> bool:
    """No keys and no max_pending literal: ``insert_job`` can write it alone."""
    return job.identity_key is None and job.idempotency_key is None and job.max_pending is None


def _is_bare(job: NewJob) -> bool:
    """No optional column set: ``insert_job_bare`` leaves them all to their defaults."""
    return (
        _untimed(job)
        and job.fairness_key is None
        and not job.metadata
        and not job.tags
        and job.trace_id is None
        and job.span_id is None
    )


def _untimed(job: NewJob) -> bool:
    """No time option set (schedule, deadline, attempt timeout): nothing for
    :func:`_present_columns` to check."""
    return (
        job.scheduled_at is None and job.schedule_to_close is None and job.attempt_timeout is None
    )


def _present_columns(jobs: Sequence[NewJob]) -> frozenset[str]:
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


@dataclass(frozen=True, slots=True)
class _Documents:
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
    def of(cls, jobs: Sequence[NewJob]) -> _Documents:
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


def _options_of(jobs: Sequence[NewJob]) -> Sequence[NewJob]:
    """Jobs whose options are the batch's: a uniform batch's are its template's, read once."""
    return [jobs.template] if isinstance(jobs, UniformJobs) else jobs


def _listed(jobs: Sequence[NewJob]) -> list[NewJob]:
    """The jobs as the per-job paths take them (a list already is one; no copy)."""
    return jobs if isinstance(jobs, list) else list(jobs)


def _wake_queue(jobs: Sequence[NewJob]) -> str:
    """The queue to wake: the one all jobs share, else "" (any queue)."""
    if isinstance(jobs, UniformJobs):
        return jobs.template.queue
    queues = {j.queue for j in jobs}
    return queues.pop() if len(queues) == 1 else ""


def _key_refusal(jobs: Sequence[NewJob], message: str) -> EnqueueRefused:
    """The lock-timeout refusal naming the key a statement over ``jobs`` waited for."""
    if any(j.identity_key is not None for j in jobs):
        return UniqueForLockTimeoutError(message)
    return IdempotencyKeyLockTimeoutError(message)


# A job's outcome while the rules run: a stored id, or the index of a row to insert.
_Ref = tuple[bool, int]  # (is_new, stored id or insert index)


@dataclass(slots=True)
class _Lookup:
    idempotency: dict[tuple[str, str], _Ref]
    identity: dict[tuple[str, str], _Ref]
    waiting: dict[str, int]
    stored_max_pending: dict[str, int | None]


class Enqueuer:
    """Runs enqueues on a driver; shared by the store and by bound enqueuers."""

    def __init__(self, schema: Schema, budgets: LockBudgets, gate: WakeGate | None = None) -> None:
        self._schema = schema
        self._budgets = budgets
        self._gate = gate

    async def enqueue_many(
        self, driver: Driver, jobs: Sequence[NewJob], now: datetime | None, *, bound: bool
    ) -> list[EnqueueResult]:
        """Apply the JobEnqueuer rules to ``jobs`` in input order, all or nothing."""
        check_aware(now)
        # A uniform batch keeps its shape: its options are read once, from its template.
        batch: Sequence[NewJob] = jobs if isinstance(jobs, UniformJobs) else list(jobs)
        probe = _options_of(batch)
        if len(probe) != 1 or not _untimed(probe[0]):
            _present_columns(probe)  # validates every timestamp first
        if not batch:
            return []
        # JSON values are encoded (and so checked) by each path before it writes anything.
        if not bound:
            return await self._run(driver, batch, now, isolate=False)
        previous = await driver.fetchval("current_lock_timeout")
        try:
            return await self._run(driver, batch, now, isolate=True)
        finally:
            # Statements set lock_timeout transaction-locally; give the caller's back.
            with contextlib.suppress(StoreUnavailable):
                await driver.fetchval("set_lock_timeout", lock_timeout=previous)

    async def enqueue_one(self, driver: Driver, job: NewJob, now: datetime | None) -> EnqueueResult:
        """:meth:`enqueue_many` of ``[job]`` on an unbound driver, straight to
        ``insert_job`` for a plain job (the usual single enqueue)."""
        check_aware(now)
        if not _untimed(job):
            _present_columns((job,))  # validates its timestamps
        if _is_plain(job):
            try:
                one = await self._insert_one(driver, job, now, gated=True)
            except (UniqueConflict, TransientConflict):
                pass  # the full path runs it again
            else:
                if isinstance(one, EnqueueResult):
                    return one
                # A stored max_pending applies: the locked path, without insert_job again.
                return (await self._run(driver, [job], now, isolate=False, limited=True))[0]
        return (await self._run(driver, [job], now, isolate=False))[0]

    async def _run(
        self,
        driver: Driver,
        batch: Sequence[NewJob],
        now: datetime | None,
        *,
        isolate: bool,
        limited: bool = False,
    ) -> list[EnqueueResult]:
        for _ in range(CONFLICT_RETRIES):
            try:
                if isolate:
                    async with driver.transaction() as tx:
                        outcome = await self._attempt(tx, batch, now, limited=limited, gated=False)
                else:
                    outcome = await self._attempt(driver, batch, now, limited=limited, gated=True)
            except (UniqueConflict, TransientConflict):
                continue
            if isinstance(outcome, list):
                return outcome
        raise _key_refusal(batch, "enqueue kept losing races for its keys; retry")

    async def _attempt(
        self,
        driver: Driver,
        jobs: Sequence[NewJob],
        now: datetime | None,
        *,
        limited: bool,
        gated: bool,
    ) -> list[EnqueueResult] | _Miss:
        """One try at the cheapest path; ``limited``: a stored max_pending is known to
        apply, so straight to the locked path. ``gated``: each statement commits on
        its own, so the wake gate may spare it the wake-up."""
        if limited:
            return await self._locked(driver, _listed(jobs), now)
        options = _options_of(jobs)
        if len(jobs) == 1 and _is_plain(jobs[0]):  # the usual single enqueue, checked first
            one = await self._insert_one(driver, jobs[0], now, gated=gated)
            if isinstance(one, EnqueueResult):
                return [one]
        elif not any(j.max_pending is not None for j in options):
            if not any(_is_keyed(j) for j in options):  # a batch: a single one is plain (above)
                if len(jobs) >= COPY_MIN_JOBS:
                    ids = await self._copy(driver, jobs, now, gated=gated)
                else:
                    ids = await self._insert(
                        driver, _listed(jobs), now, check_limits=True, gated=gated
                    )
                if isinstance(ids, list):
                    return [build_enqueue_result(job_id) for job_id in ids]
            elif len(jobs) == 1:
                single = await self._insert_keyed(driver, jobs[0], now, gated=gated)
                if isinstance(single, EnqueueResult):
                    return [single]
                if single is _RACED:
                    return _RACED
            else:
                results = await self._lookup_and_insert(
                    driver, _listed(jobs), now, locked=False, gated=gated
                )
                if isinstance(results, list):
                    return results
        return await self._locked(driver, _listed(jobs), now)

    # --- wake-ups ----------------------------------------------------------------------

    def _channel(self, queue: str, gated: bool) -> str | None:
        """The wake channel when the statement waking ``queue`` carries the wake-up, else
        None (the gate then owes the queue one: report the statement to :meth:`_done`)."""
        if not gated or self._gate is None or self._gate.carries(queue):
            return self._schema.wake_channel
        return None

    def _done(self, queue: str, gated: bool, channel: str | None, *, wrote: bool) -> None:
        if gated and self._gate is not None:
            self._gate.done(queue, carried=channel is not None, wrote=wrote)

    async def _waking_row(
        self,
        driver: Driver,
        query: str,
        wake: str,
        /,
        *,
        gated: bool,
        wrote: Callable[[Row | None], bool],
        **params: object,
    ) -> Row | None:
        """``fetchrow`` of an insert statement that wakes queue ``wake`` (or is spared it)."""
        channel = self._channel(wake, gated)
        try:
            row = await driver.fetchrow(query, channel=channel, **params)
        except BaseException:
            self._done(wake, gated, channel, wrote=True)  # it may have committed
            raise
        self._done(wake, gated, channel, wrote=wrote(row))
        return row

    # --- the statements ---------------------------------------------------------------

    async def _copy(
        self, driver: Driver, jobs: Sequence[NewJob], now: datetime | None, *, gated: bool
    ) -> list[int] | _Miss:
        """COPY plain ``jobs`` in order; their ids (ascending = input order), or LIMITED."""
        uniform = jobs.template if isinstance(jobs, UniformJobs) else None
        row = await driver.fetchrow(
            "reserve_job_ids",
            limit_actors=[uniform.actor] if uniform else sorted({j.actor for j in jobs}),
            jobs_table=f"{self._schema.quoted}.jobs",
            now=now,
            count=len(jobs),
        )
        assert row is not None
        if not row["open"]:
            return _LIMITED
        # One sequence, taken in order: ascending is input order.
        ids = sorted(row["ids"])
        clock_given = now is not None
        if uniform is not None:
            plan = plan_copy([uniform], row["now"], clock_given=clock_given)
            payloads: Sequence[Mapping[str, JSON]] = cast(UniformJobs, jobs).payloads
            options: Sequence[str] | str = plan.options[0]
        else:
            plan = plan_copy(jobs, row["now"], clock_given=clock_given)
            payloads, options = [j.payload for j in jobs], plan.options
        # Rendered while the server loads the previous chunk.
        data = copy_chunks(payloads, ids, options)
        await driver.copy_in(self._schema.name, "jobs", plan.columns, data)
        queue = _wake_queue(jobs)
        channel = self._channel(queue, gated)
        try:
            if channel is not None:  # else the gate owes the queue one
                await driver.execute("wake_queue", channel=channel, wake_queue=queue)
        finally:
            self._done(queue, gated, channel, wrote=True)
        return ids

    async def _insert(
        self,
        driver: Driver,
        jobs: Sequence[NewJob],
        now: datetime | None,
        *,
        check_limits: bool,
        gated: bool,
    ) -> list[int] | _Miss:
        """Insert ``jobs`` in order; their ids (ascending = input order), or LIMITED."""
        budget = self._key_budget(jobs)
        present = _present_columns(jobs)
        documents = _Documents.of(jobs)
        queue = _wake_queue(jobs)
        try:
            row = await self._waking_row(
                driver,
                "insert_jobs",
                queue,
                gated=gated,
                wrote=lambda r: r is not None and bool(r["ids"]),
                now=now,
                lock_timeout=None if budget is None else budget_lock_timeout(budget, driver),
                check_limits=check_limits,
                limit_actors=sorted({j.actor for j in jobs}),
                queue=[j.queue for j in jobs],
                actor=[j.actor for j in jobs],
                payloads=documents.payloads,
                priority=[j.priority for j in jobs],
                max_attempts=[j.max_attempts for j in jobs],
                scheduled_at=_optional(jobs, "scheduled_at", present),
                schedule_to_close=_optional(jobs, "schedule_to_close", present),
                fairness_key=_optional(jobs, "fairness_key", present),
                identity_key=_optional(jobs, "identity_key", present),
                idempotency_key=_optional(jobs, "idempotency_key", present),
                metadata=documents.metadata,
                tags=documents.tags,
                trace_id=_optional(jobs, "trace_id", present),
                span_id=_optional(jobs, "span_id", present),
                attempt_timeout=_optional(jobs, "attempt_timeout", present),
                wake_queue=queue,
            )
        except LockTimeout as exc:
            raise _key_refusal(jobs, f"gave up waiting for a key lock: {exc}") from exc
        assert row is not None
        if not row["open"]:
            return _LIMITED
        # Ids come from one sequence in insertion order, so ascending is input order.
        ids = sorted(row["ids"])
        if len(ids) != len(jobs):
            raise AssertionError(f"inserted {len(ids)} of {len(jobs)} jobs")
        return ids

    async def _insert_one(
        self, driver: Driver, job: NewJob, now: datetime | None, *, gated: bool
    ) -> EnqueueResult | _Miss:
        """One job without keys (the usual single enqueue); its result, or LIMITED."""
        if now is None and _is_bare(job):
            row = await self._waking_row(
                driver,
                "insert_job_bare",
                job.queue,
                gated=gated,
                wrote=_is_row,
                queue=job.queue,
                actor=job.actor,
                payload=dump_json_object(job.payload),
                priority=job.priority,
                max_attempts=job.max_attempts,
            )
        else:
            row = await self._waking_row(
                driver,
                "insert_job",
                job.queue,
                gated=gated,
                wrote=_is_row,
                now=now,
                queue=job.queue,
                actor=job.actor,
                payload=dump_json_object(job.payload),
                priority=job.priority,
                max_attempts=job.max_attempts,
                scheduled_at=job.scheduled_at,
                schedule_to_close=job.schedule_to_close,
                fairness_key=job.fairness_key,
                metadata=dump_json_object(job.metadata),
                tags=list(job.tags),
                trace_id=job.trace_id,
                span_id=job.span_id,
                attempt_timeout=job.attempt_timeout,
            )
        if row is None:  # nothing written: a stored max_pending applies
            return _LIMITED
        return build_enqueue_result(row["inserted_id"])

    async def _insert_keyed(
        self, driver: Driver, job: NewJob, now: datetime | None, *, gated: bool
    ) -> EnqueueResult | _Miss:
        budget = self._key_budget([job])
        try:
            row = await self._waking_row(
                driver,
                "insert_job_keyed",
                job.queue,
                gated=gated,
                wrote=lambda r: r is not None and r["inserted_id"] is not None,
                now=now,
                lock_timeout=None if budget is None else budget_lock_timeout(budget, driver),
                queue=job.queue,
                actor=job.actor,
                payload=dump_json_object(job.payload),
                priority=job.priority,
                max_attempts=job.max_attempts,
                scheduled_at=job.scheduled_at,
                schedule_to_close=job.schedule_to_close,
                fairness_key=job.fairness_key,
                identity_key=job.identity_key,
                idempotency_key=job.idempotency_key,
                metadata=dump_json_object(job.metadata),
                tags=dump_json(list(job.tags)) if job.tags else None,
                trace_id=job.trace_id,
                span_id=job.span_id,
                attempt_timeout=job.attempt_timeout,
            )
        except LockTimeout as exc:
            raise _key_refusal([job], f"gave up waiting for a key lock: {exc}") from exc
        assert row is not None
        if row["existing_id"] is not None:
            return EnqueueResult(row["existing_id"], was_existing=True)
        if row["inserted_id"] is not None:
            return EnqueueResult(row["inserted_id"])
        return _RACED if row["open"] else _LIMITED

    async def _locked(
        self, driver: Driver, batch: list[NewJob], now: datetime | None
    ) -> list[EnqueueResult] | _Miss:
        keys = sorted({self._schema.lock_key(f"max_pending:{j.actor}") for j in batch})
        async with driver.transaction() as tx:
            try:
                await tx.fetchval(
                    "lock_max_pending",
                    keys=keys,
                    lock_timeout=budget_lock_timeout(self._budgets.max_pending_ms, tx),
                )
            except LockTimeout as exc:
                raise MaxPendingLockTimeoutError(
                    f"gave up waiting for the max_pending lock: {exc}"
                ) from exc
            # In a transaction: the insert carries its wake-up to the commit.
            return await self._lookup_and_insert(tx, batch, now, locked=True, gated=False)

    async def _lookup_and_insert(
        self,
        driver: Driver,
        batch: list[NewJob],
        now: datetime | None,
        *,
        locked: bool,
        gated: bool,
    ) -> list[EnqueueResult] | _Miss:
        lookup = await self._lookup(driver, batch, count_waiting=locked)
        if not locked and any(v is not None for v in lookup.stored_max_pending.values()):
            return _LIMITED
        refs, to_insert = self._apply_rules(batch, lookup, enforce_limits=locked)
        ids: list[int] = []
        if to_insert:
            inserted = await self._insert(
                driver, to_insert, now, check_limits=not locked, gated=gated
            )
            if not isinstance(inserted, list):
                return inserted
            ids = inserted
        return [
            EnqueueResult(ids[value] if is_new else value, was_existing)
            for (is_new, value), was_existing in refs
        ]

    async def _lookup(self, driver: Driver, batch: list[NewJob], *, count_waiting: bool) -> _Lookup:
        keyed = [j for j in batch if _is_keyed(j)]
        rows = await driver.fetch(
            "enqueue_lookup",
            key_actor=[j.actor for j in keyed],
            identity_key=[j.identity_key for j in keyed],
            idempotency_key=[j.idempotency_key for j in keyed],
            actors=sorted({j.actor for j in batch}),
            count_waiting=count_waiting,
        )
        lookup = _Lookup({}, {}, {}, {})
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

    @staticmethod
    def _apply_rules(
        batch: list[NewJob], lookup: _Lookup, *, enforce_limits: bool
    ) -> tuple[list[tuple[_Ref, bool]], list[NewJob]]:
        """The per-job rules in input order, exactly as the memory adapter applies them.

        Returns each job's outcome (a stored id or an insert index, and whether it
        is an existing job) and the jobs to insert. Raises ``MaxPendingExceeded``
        for the first job over its actor's limit.
        """
        refs: list[tuple[_Ref, bool]] = []
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
            ref: _Ref = (True, len(to_insert))
            to_insert.append(job)
            lookup.waiting[job.actor] = lookup.waiting.get(job.actor, 0) + 1
            if idem is not None:
                lookup.idempotency[idem] = ref
            if ident is not None:
                lookup.identity[ident] = ref
            refs.append((ref, False))
        return refs, to_insert

    def _key_budget(self, jobs: Sequence[NewJob]) -> float | None:
        """The lock budget of an insert that may wait on a key index; None when none can."""
        budgets = []
        if any(j.identity_key is not None for j in jobs):
            budgets.append(self._budgets.unique_ms)
        if any(j.idempotency_key is not None for j in jobs):
            budgets.append(self._budgets.idempotency_ms)
        if not budgets:
            return None
        return 0.0 if any(b <= 0 for b in budgets) else max(budgets)


def _is_row(row: Row | None) -> bool:
    return row is not None


class BoundEnqueuer:
    """A ``JobEnqueuer`` on the caller's own connection and transaction.

    Jobs become visible when the caller commits and vanish on rollback. Each
    attempt runs in a savepoint (or in its own transaction when the
    connection is in none), so a refusal never aborts the caller's
    transaction. The caller owns the connection: nothing here closes it.
    """

    def __init__(
        self, driver: Driver, enqueuer: Enqueuer, lock: asyncio.Lock | None = None
    ) -> None:
        self._driver = driver
        self._enqueuer = enqueuer
        # The connection's lock (see connection_locks): calls on it take turns.
        self._lock = lock if lock is not None else asyncio.Lock()

    async def enqueue(self, job: NewJob, *, now: datetime | None = None) -> EnqueueResult:
        return (await self.enqueue_many([job], now=now))[0]

    async def enqueue_many(
        self, jobs: Sequence[NewJob], *, now: datetime | None = None
    ) -> list[EnqueueResult]:
        # Under the driver's call bound, the wait for the connection's turn counts too.
        async with CallBudget(call_timeout_of(self._driver)), _turn(self._lock):
            return await self._enqueuer.enqueue_many(self._driver, jobs, now, bound=True)


@asynccontextmanager
async def _turn(lock: asyncio.Lock) -> AsyncIterator[None]:
    """``lock``, waited for as the caller's connection's turn (what a call that runs out
    of time waiting for it says it waited for)."""
    budget = active_budget()
    if budget is not None:
        budget.on_expiry = _turn_error
    try:
        await lock.acquire()
    finally:
        if budget is not None:
            budget.on_expiry = None
    try:
        yield
    finally:
        lock.release()


def _turn_error(bound: float) -> StoreTimeout:
    return StoreTimeout(
        f"gave up after {bound:g} s waiting for a turn on the connection passed as "
        "connection=: another TaskQ call on it had not finished",
        waited_for="its turn on the caller's connection",
        timeout=bound,
    )


__all__ = ["COPY_MIN_JOBS", "BoundEnqueuer", "Enqueuer"]
