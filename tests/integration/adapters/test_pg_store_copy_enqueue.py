"""The COPY path of a big plain batch, on both drivers: when it runs, and that it keeps the rules.

A batch of ``COPY_MIN_JOBS`` or more jobs without keys or max_pending is
written by ``reserve_job_ids`` + ``COPY`` + ``wake_queue``; a smaller one by
one ``insert_jobs``. Either way a stored max_pending sends it to the locked
path, and inside a caller's transaction the rows follow that transaction.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.integration.adapters.pg_store_support import StoreDriver, counted_store

from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.store.enqueue import COPY_MIN_JOBS
from taskq.adapters.postgres.store.enqueue_copy import CHUNK_ROWS
from taskq.domain.actor_config import ActorConfig
from taskq.domain.errors import MaxPendingExceeded
from taskq.domain.job import NewJob

pytestmark = pytest.mark.integration


def plain(count: int, actor: str = "a") -> list[NewJob]:
    return [NewJob(actor=actor, payload={"n": n}) for n in range(count)]


async def test_a_batch_below_the_threshold_is_one_insert(store: Any, schema: Schema) -> None:
    """One job fewer than COPY_MIN_JOBS still goes in as one insert_jobs statement."""
    counted, calls = counted_store(store, schema)
    results = await counted.enqueue_many(plain(COPY_MIN_JOBS - 1))
    assert calls.calls == ["insert_jobs"]
    assert len(results) == COPY_MIN_JOBS - 1


async def test_a_copied_batch_with_a_stored_max_pending_takes_the_locked_path(
    store: Any, schema: Schema
) -> None:
    """A stored max_pending closes the gate: nothing is copied and the limit holds."""
    await store.sync_actor_configs(
        [ActorConfig(actor="a", queue="default", max_pending=COPY_MIN_JOBS + 10)]
    )
    counted, calls = counted_store(store, schema)
    results = await counted.enqueue_many(plain(COPY_MIN_JOBS))
    assert len(results) == COPY_MIN_JOBS
    assert calls.calls[0] == "reserve_job_ids"
    assert "<copy jobs>" not in calls.calls
    with pytest.raises(MaxPendingExceeded):
        await counted.enqueue_many(plain(COPY_MIN_JOBS))
    assert await store.count_active() == COPY_MIN_JOBS


async def test_a_copied_batch_in_the_callers_transaction_follows_it(
    driver: StoreDriver, dsn: str, store: Any
) -> None:
    """COPY on the caller's connection: invisible until commit, gone on rollback."""

    class Abort(Exception):
        pass

    async def enqueue_then_abort(conn: Any) -> None:
        async with conn.transaction():
            await store.bound_to(conn).enqueue_many(plain(COPY_MIN_JOBS))
            raise Abort

    async with driver.caller_connection(dsn) as conn:
        with pytest.raises(Abort):
            await enqueue_then_abort(conn)
        assert await store.count_active() == 0
        async with conn.transaction():
            results = await store.bound_to(conn).enqueue_many(plain(COPY_MIN_JOBS))
            assert await store.get(results[0].job_id) is None
        ids = [r.job_id for r in results]
        assert ids == sorted(ids)
        assert await store.count_active() == COPY_MIN_JOBS
        last = await store.get(ids[-1])
        assert last is not None
        assert dict(last.payload) == {"n": COPY_MIN_JOBS - 1}


async def test_a_bad_payload_late_in_a_streamed_copy_stores_nothing(
    driver: StoreDriver, dsn: str, store: Any
) -> None:
    """The COPY is rendered chunk by chunk while the server loads it: a payload JSON
    cannot hold in a late chunk aborts the whole statement (ValueError, nothing stored),
    on a pooled connection and inside a caller's transaction, which stays usable."""
    jobs = plain(CHUNK_ROWS * 2 + 10)
    jobs[-3] = NewJob(actor="a", payload={"n": float("nan")})
    with pytest.raises(ValueError, match=r"(?i)nan|json|float"):
        await store.enqueue_many(jobs)
    assert await store.count_active() == 0
    async with driver.caller_connection(dsn) as conn:
        async with conn.transaction():
            with pytest.raises(ValueError, match=r"(?i)nan|json|float"):
                await store.bound_to(conn).enqueue_many(jobs)
            results = await store.bound_to(conn).enqueue_many(plain(COPY_MIN_JOBS))
        assert len(results) == COPY_MIN_JOBS
    assert await store.count_active() == COPY_MIN_JOBS
    # The pool's connections are clean: the next batch goes through.
    assert len(await store.enqueue_many(plain(COPY_MIN_JOBS))) == COPY_MIN_JOBS
