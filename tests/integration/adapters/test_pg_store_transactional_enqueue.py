"""Enqueue inside the caller's own transaction (``store.bound_to(conn)``), on both drivers.

A job enqueued on the caller's connection is part of the caller's
transaction: invisible to others until it commits, gone if it rolls back.
A refused enqueue must not poison that transaction, and the enqueue's lock
budgets must not leak into it.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from tests.integration.adapters.pg_store_support import ASYNCPG, PSYCOPG, StoreDriver

from taskq.adapters.postgres.schema import Schema
from taskq.domain.errors import MaxPendingExceeded
from taskq.domain.job import EnqueueResult, NewJob

pytestmark = pytest.mark.integration


async def test_bound_enqueue_is_visible_only_after_the_callers_commit(
    driver: StoreDriver, dsn: str, store: Any
) -> None:
    """A job enqueued in the caller's transaction is invisible to others until it commits."""
    async with driver.caller_connection(dsn) as conn:
        async with conn.transaction():
            result = await store.bound_to(conn).enqueue(NewJob(actor="a"))
            assert result.was_existing is False
            assert await store.get(result.job_id) is None
            assert await store.count_active() == 0
        job = await store.get(result.job_id)
        assert job is not None
        assert await store.count_active() == 1


async def test_bound_enqueue_vanishes_when_the_caller_rolls_back(
    driver: StoreDriver, dsn: str, store: Any
) -> None:
    """Jobs enqueued in a transaction the caller rolls back are never stored."""

    class Abort(Exception):
        pass

    async def enqueue_then_abort(conn: Any) -> list[EnqueueResult]:
        async with conn.transaction():
            results = await store.bound_to(conn).enqueue_many(
                [NewJob(actor="a"), NewJob(actor="b")]
            )
            assert len(results) == 2
            raise Abort(results)

    async with driver.caller_connection(dsn) as conn:
        with pytest.raises(Abort) as aborted:
            await enqueue_then_abort(conn)
        results: list[EnqueueResult] = aborted.value.args[0]
        assert await store.count_active() == 0
        for result in results:
            assert await store.get(result.job_id) is None


async def test_refused_bound_enqueue_leaves_the_callers_transaction_usable(
    driver: StoreDriver, dsn: str, store: Any
) -> None:
    """A MaxPendingExceeded inside the caller's transaction leaves it usable and committable."""
    async with driver.caller_connection(dsn) as conn:
        async with conn.transaction():
            enqueuer = store.bound_to(conn)
            kept = await enqueuer.enqueue(NewJob(actor="a", max_pending=1))
            # The caller's own uncommitted job counts toward max_pending.
            with pytest.raises(MaxPendingExceeded):
                await enqueuer.enqueue(NewJob(actor="a", max_pending=1))
            assert await driver.fetchval(conn, "SELECT 6 * 7") == 42
        assert await store.get(kept.job_id) is not None
        assert await store.count_active() == 1


async def test_bound_enqueue_gives_the_callers_lock_timeout_back(
    driver: StoreDriver, dsn: str, store: Any
) -> None:
    """The enqueue's transaction-local lock budgets do not leak into the caller's transaction."""
    async with driver.caller_connection(dsn) as conn, conn.transaction():
        await driver.execute(conn, "SET LOCAL lock_timeout = '7s'")
        enqueuer = store.bound_to(conn)
        await enqueuer.enqueue(NewJob(actor="a", identity_key="k", max_pending=5))
        await enqueuer.enqueue_many([NewJob(actor="b", idempotency_key=f"i{n}") for n in range(3)])
        assert await driver.fetchval(conn, "SHOW lock_timeout") == "7s"


async def test_bound_enqueue_dedups_against_the_callers_own_jobs(
    driver: StoreDriver, dsn: str, store: Any
) -> None:
    """Within the caller's transaction a second enqueue with the same key returns the first job."""
    async with driver.caller_connection(dsn) as conn:
        async with conn.transaction():
            enqueuer = store.bound_to(conn)
            first = await enqueuer.enqueue(NewJob(actor="a", identity_key="k"))
            again = await enqueuer.enqueue(NewJob(actor="a", identity_key="k"))
            assert (again.job_id, again.was_existing) == (first.job_id, True)
        assert await store.count_active() == 1


async def test_asyncpg_bound_enqueue_works_in_a_hand_begun_transaction(
    dsn: str, schema: Schema
) -> None:
    """On asyncpg, a transaction begun with a plain BEGIN is joined (savepoints, not an error)."""
    store = ASYNCPG.store(dsn, schema=schema, max_size=1)
    try:
        async with ASYNCPG.caller_connection(dsn) as conn:
            await conn.execute("BEGIN")
            result = await store.bound_to(conn).enqueue(NewJob(actor="a", max_pending=3))
            await conn.execute("ROLLBACK")
        assert await store.get(result.job_id) is None
    finally:
        await store.close()


async def test_psycopg_bound_enqueue_joins_the_implicit_transaction(
    dsn: str, schema: Schema
) -> None:
    """On a psycopg connection that is not in autocommit, the job is the caller's to commit."""
    store = PSYCOPG.store(dsn, schema=schema, max_size=1)
    try:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=False)
        try:
            enqueuer = store.bound_to(conn)
            rolled_back = await enqueuer.enqueue(NewJob(actor="a", identity_key="k"))
            await conn.rollback()
            committed = await enqueuer.enqueue(NewJob(actor="a"))
            assert await store.get(committed.job_id) is None
            await conn.commit()
        finally:
            await conn.close()
        assert await store.get(rolled_back.job_id) is None
        assert await store.get(committed.job_id) is not None
    finally:
        await store.close()
