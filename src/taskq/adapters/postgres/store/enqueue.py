"""JobEnqueuer on Postgres: runs the plan of :mod:`.enqueue_plan` on a connection.

The plan picks the cheapest path that keeps every rule; this module runs its
statements, falls back to the locked path when a statement without the lock
ran into a stored max_pending, and re-runs an attempt that lost a race.

Every statement that can wait for a lock runs with a transaction-local
``lock_timeout`` from :class:`LockBudgets`. Each insert statement sends at most
one wake-up, delivered when it commits; the store's own (autocommit) enqueues
share wake-ups through its :class:`WakeGate`, so concurrent enqueuers do not
serialise on NOTIFY's commit lock. A bound enqueuer (the caller's own
connection and transaction, :mod:`.bound_enqueue`) runs each attempt in a
savepoint so a lost race never aborts the caller's transaction, and gives
``lock_timeout`` back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

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
)
from taskq.adapters.postgres.store.enqueue_copy import copy_chunks, plan_copy
from taskq.adapters.postgres.store.enqueue_plan import (
    COPY_MIN_JOBS,
    Lookup,
    Miss,
    Path,
    apply_rules,
    choose_path,
    insert_job_params,
    insert_jobs_params,
    insert_keyed_params,
    is_plain,
    key_budget,
    key_refusal,
    listed,
    lookup_params,
    max_pending_lock_keys,
    options_of,
    present_columns,
    single_path,
    untimed,
    wake_queue,
)
from taskq.adapters.postgres.store.rows import check_aware
from taskq.adapters.postgres.store.wake_gate import WakeGate
from taskq.domain.errors import MaxPendingLockTimeoutError, StoreUnavailable
from taskq.domain.job import JSON, EnqueueResult, NewJob, UniformJobs, build_enqueue_result


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
        probe = options_of(batch)
        if len(probe) != 1 or not untimed(probe[0]):
            present_columns(probe)  # validates every timestamp first
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
        if not untimed(job):
            present_columns((job,))  # validates its timestamps
        if is_plain(job):
            path = single_path(job, clock_given=now is not None)
            try:
                one = await self._insert_one(driver, job, now, path=path, gated=True)
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
        raise key_refusal(batch, "enqueue kept losing races for its keys; retry")

    async def _attempt(
        self,
        driver: Driver,
        jobs: Sequence[NewJob],
        now: datetime | None,
        *,
        limited: bool,
        gated: bool,
    ) -> list[EnqueueResult] | Miss:
        """One try along the planned path; ``limited``: a stored max_pending is known to
        apply, so straight to the locked path. ``gated``: each statement commits on
        its own, so the wake gate may spare it the wake-up."""
        path = choose_path(jobs, clock_given=now is not None, limited=limited)
        if path is Path.BARE or path is Path.SINGLE:
            one = await self._insert_one(driver, jobs[0], now, path=path, gated=gated)
            if isinstance(one, EnqueueResult):
                return [one]
        elif path is Path.COPY or path is Path.BATCH:
            if path is Path.COPY:
                ids = await self._copy(driver, jobs, now, gated=gated)
            else:
                ids = await self._insert(driver, listed(jobs), now, check_limits=True, gated=gated)
            if isinstance(ids, list):
                return [build_enqueue_result(job_id) for job_id in ids]
        elif path is Path.KEYED:
            single = await self._insert_keyed(driver, jobs[0], now, gated=gated)
            if isinstance(single, EnqueueResult):
                return [single]
            if single is Miss.RACED:
                return Miss.RACED
        elif path is Path.LOOKUP:
            results = await self._lookup_and_insert(
                driver, listed(jobs), now, locked=False, gated=gated
            )
            if isinstance(results, list):
                return results
        # Path.LOCKED, or a path above that ran into a stored max_pending.
        return await self._locked(driver, listed(jobs), now)

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
        params: Mapping[str, Any],
        /,
        *,
        gated: bool,
        wrote: Callable[[Row | None], bool],
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
    ) -> list[int] | Miss:
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
            return Miss.LIMITED
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
        queue = wake_queue(jobs)
        channel = self._channel(queue, gated)
        try:
            if channel is not None:  # else the gate owes the queue one
                await driver.execute("wake_queue", channel=channel, wake_queue=queue)
        finally:
            self._done(queue, gated, channel, wrote=True)
        return ids

    def _key_lock_timeout(self, jobs: Sequence[NewJob], driver: Driver) -> str | None:
        budget = key_budget(jobs, self._budgets)
        return None if budget is None else budget_lock_timeout(budget, driver)

    async def _insert(
        self,
        driver: Driver,
        jobs: Sequence[NewJob],
        now: datetime | None,
        *,
        check_limits: bool,
        gated: bool,
    ) -> list[int] | Miss:
        """Insert ``jobs`` in order; their ids (ascending = input order), or LIMITED."""
        params = insert_jobs_params(
            jobs,
            now,
            check_limits=check_limits,
            lock_timeout=self._key_lock_timeout(jobs, driver),
        )
        try:
            row = await self._waking_row(
                driver, "insert_jobs", params["wake_queue"], params, gated=gated, wrote=_wrote_ids
            )
        except LockTimeout as exc:
            raise key_refusal(jobs, f"gave up waiting for a key lock: {exc}") from exc
        assert row is not None
        if not row["open"]:
            return Miss.LIMITED
        # Ids come from one sequence in insertion order, so ascending is input order.
        ids = sorted(row["ids"])
        if len(ids) != len(jobs):
            raise AssertionError(f"inserted {len(ids)} of {len(jobs)} jobs")
        return ids

    async def _insert_one(
        self, driver: Driver, job: NewJob, now: datetime | None, *, path: Path, gated: bool
    ) -> EnqueueResult | Miss:
        """One job without keys (the usual single enqueue) along ``path`` (BARE or
        SINGLE); its result, or LIMITED."""
        bare = path is Path.BARE
        row = await self._waking_row(
            driver,
            "insert_job_bare" if bare else "insert_job",
            job.queue,
            insert_job_params(job, now, bare=bare),
            gated=gated,
            wrote=_is_row,
        )
        if row is None:  # nothing written: a stored max_pending applies
            return Miss.LIMITED
        return build_enqueue_result(row["inserted_id"])

    async def _insert_keyed(
        self, driver: Driver, job: NewJob, now: datetime | None, *, gated: bool
    ) -> EnqueueResult | Miss:
        params = insert_keyed_params(job, now, lock_timeout=self._key_lock_timeout([job], driver))
        try:
            row = await self._waking_row(
                driver, "insert_job_keyed", job.queue, params, gated=gated, wrote=_wrote_one
            )
        except LockTimeout as exc:
            raise key_refusal([job], f"gave up waiting for a key lock: {exc}") from exc
        assert row is not None
        if row["existing_id"] is not None:
            return EnqueueResult(row["existing_id"], was_existing=True)
        if row["inserted_id"] is not None:
            return EnqueueResult(row["inserted_id"])
        return Miss.RACED if row["open"] else Miss.LIMITED

    async def _locked(
        self, driver: Driver, batch: list[NewJob], now: datetime | None
    ) -> list[EnqueueResult] | Miss:
        keys = max_pending_lock_keys(batch, self._schema)
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
    ) -> list[EnqueueResult] | Miss:
        rows = await driver.fetch("enqueue_lookup", **lookup_params(batch, count_waiting=locked))
        lookup = Lookup.of(rows)
        if not locked and lookup.limited():
            return Miss.LIMITED
        refs, to_insert = apply_rules(batch, lookup, enforce_limits=locked)
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


def _is_row(row: Row | None) -> bool:
    return row is not None


def _wrote_ids(row: Row | None) -> bool:
    return row is not None and bool(row["ids"])


def _wrote_one(row: Row | None) -> bool:
    return row is not None and row["inserted_id"] is not None


__all__ = ["COPY_MIN_JOBS", "Enqueuer"]
