"""What the heartbeat waits for on Postgres (locks are taken by a plain connection of
the test's, so these are not contract tests).

An application may lock a job's row (``SELECT ... FOR UPDATE`` or ``FOR SHARE`` in
its own transaction). The heartbeat still answers at once: it reports every
running job the worker owns, the locked one too with its cancel phase, and extends
the lease of every row it can lock now; the locked row's lease is extended by the
first beat after the lock ends. ``isolate_worker`` hands back every job but the
locked one, which is left to its lease and the leader's sweep.

What the heartbeat can still wait for (a free connection of the pool, the
server's answer: a lock on a whole table, a dead network) is named when its
``Heartbeat.timeout`` runs out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from contracts.helpers import LEASE, at, claim, enqueue, get, register

from taskq.adapters.postgres.schema import Schema
from taskq.domain.cancel_phase import CancelPhase
from taskq.domain.errors import PoolWaitTimeout, ServerAnswerTimeout
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Heartbeat, Isolation

pytestmark = pytest.mark.integration

#: Far longer than an answer takes, far shorter than a wait on the lock would be.
ANSWER_WITHIN = 5.0
LOCKS_THAT_CONFLICT = ("FOR UPDATE", "FOR NO KEY UPDATE", "FOR SHARE")


@asynccontextmanager
async def row_locked(dsn: str, schema: Schema, job_id: int, mode: str) -> AsyncIterator[None]:
    """Job ``job_id``'s row locked ``mode`` by another session's open transaction."""
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute(f"SELECT 1 FROM {schema.name}.jobs WHERE id = $1 {mode}", job_id)
            yield
    finally:
        await conn.close()


async def _two_running_jobs(store: Any) -> tuple[int, int]:
    """Jobs ``locked`` (its cancel requested) and ``free``, both running under ``w1``."""
    await register(store, "w1")
    await enqueue(store)
    await enqueue(store)
    locked, free = await claim(store, worker="w1", limit=2, now=at(1))
    assert await store.request_cancel(locked.id, now=at(2)) is JobStatus.RUNNING
    return locked.id, free.id


@pytest.mark.parametrize("mode", LOCKS_THAT_CONFLICT)
async def test_a_row_locked_elsewhere_is_reported_but_not_waited_for(
    store: Any, dsn: str, schema: Schema, mode: str
) -> None:
    """A beat while another session holds a job's row locked answers at once, reports
    both running jobs (the locked one with its cancel phase), extends the free one's
    lease and leaves the locked one's as it was; the first beat after the lock ends
    extends it."""
    locked, free = await _two_running_jobs(store)
    lease = timedelta(seconds=90)
    async with row_locked(dsn, schema, locked, mode):
        report = await asyncio.wait_for(
            store.heartbeat(Heartbeat(worker_id="w1", lease=lease, now=at(30))), ANSWER_WITHIN
        )
        assert {v.lease.job_id: v.cancel_phase for v in report.running} == {
            locked: CancelPhase.COOPERATIVE,
            free: CancelPhase.NONE,
        }
        assert report.registered
    assert (await get(store, free)).lock_expires_at == at(120)
    assert (await get(store, locked)).lock_expires_at == at(1) + LEASE
    report = await store.heartbeat(Heartbeat(worker_id="w1", lease=lease, now=at(40)))
    assert {v.lease.job_id for v in report.running} == {locked, free}
    assert (await get(store, locked)).lock_expires_at == at(130)


async def test_a_key_share_lock_does_not_hold_up_the_extension(
    store: Any, dsn: str, schema: Schema
) -> None:
    """``FOR KEY SHARE`` (what a foreign key check from another table takes) does not
    conflict with a lease extension: the row's lease is extended."""
    locked, free = await _two_running_jobs(store)
    async with row_locked(dsn, schema, locked, "FOR KEY SHARE"):
        await asyncio.wait_for(
            store.heartbeat(Heartbeat(worker_id="w1", lease=LEASE, now=at(30))), ANSWER_WITHIN
        )
        assert (await get(store, locked)).lock_expires_at == at(90)
    assert (await get(store, free)).lock_expires_at == at(90)


@pytest.mark.parametrize("mode", LOCKS_THAT_CONFLICT)
async def test_isolation_skips_a_row_locked_elsewhere(
    store: Any, dsn: str, schema: Schema, mode: str
) -> None:
    """isolate_worker while another session holds a job's row locked answers at once and
    hands back every other job; the locked one stays running, its lease untouched, and
    the sweep takes it back once its lease expired and the lock ended."""
    locked, free = await _two_running_jobs(store)
    request = Isolation(worker_id="w1", retryable_actors=["a"], retry_at=at(5), now=at(5))
    async with row_locked(dsn, schema, locked, mode):
        affected = await asyncio.wait_for(store.isolate_worker(request), ANSWER_WITHIN)
    assert affected == [free]
    assert (await get(store, free)).status is JobStatus.PENDING
    kept = await get(store, locked)
    assert (kept.status, kept.locked_by, kept.lock_expires_at) == (
        JobStatus.RUNNING,
        "w1",
        at(1) + LEASE,
    )
    report = await store.reclaim_expired(now=at(1) + LEASE + timedelta(seconds=1))
    assert report.cancelled == (locked,)  # its cancel was requested


async def test_a_heartbeat_blocked_by_a_table_lock_says_it_waited_for_the_server(
    store: Any, dsn: str, schema: Schema
) -> None:
    """A heartbeat behind another session's lock on the whole jobs table ends at its
    timeout with ServerAnswerTimeout: it waited for the server's answer."""
    await register(store, "w1")
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute(f"LOCK TABLE {schema.name}.jobs IN ACCESS EXCLUSIVE MODE")
            beat = Heartbeat(worker_id="w1", lease=LEASE, timeout=timedelta(seconds=0.5))
            with pytest.raises(ServerAnswerTimeout) as raised:
                await asyncio.wait_for(store.heartbeat(beat), ANSWER_WITHIN)
    finally:
        await conn.close()
    assert raised.value.waited_for == "the server's answer"
    assert (await store.heartbeat(Heartbeat(worker_id="w1", lease=LEASE))).registered


async def test_a_heartbeat_with_no_free_connection_says_it_waited_for_the_pool(
    driver: Any, dsn: str, schema: Schema
) -> None:
    """With every connection of the store's pool taken (one, by a call blocked on a table
    lock), a heartbeat ends at its timeout with PoolWaitTimeout: every connection is in
    use."""
    one: Any = driver.store(dsn, schema=schema, max_size=1)
    try:
        await register(one, "w1")
        conn = await asyncpg.connect(dsn)
        try:
            async with conn.transaction():
                await conn.execute(f"LOCK TABLE {schema.name}.jobs IN ACCESS EXCLUSIVE MODE")
                held = asyncio.ensure_future(one.count_active())  # holds the one connection
                await asyncio.sleep(0.2)
                assert not held.done()
                beat = Heartbeat(worker_id="w1", lease=LEASE, timeout=timedelta(seconds=0.5))
                with pytest.raises(PoolWaitTimeout) as raised:
                    await asyncio.wait_for(one.heartbeat(beat), ANSWER_WITHIN)
            assert await asyncio.wait_for(held, ANSWER_WITHIN) == 0
        finally:
            await conn.close()
    finally:
        await one.close()
    assert raised.value.waited_for == "a free connection from the pool"
    assert "every connection is in use" in str(raised.value)
