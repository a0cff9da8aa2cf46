"""Postgres store connections: pool ownership, session settings, statement caching.

The contract suite pins the store's behaviour; these pin what only the
Postgres adapters have: who closes a pool, what TaskQ-built connections run
with, and that a pooled (transaction-mode pooler) store prepares nothing.
Every test runs once per driver.
"""

from __future__ import annotations

import socket

import pytest
from tests.integration.adapters.pg_store_support import StoreDriver

from taskq.adapters.postgres.schema import Schema
from taskq.domain.errors import StoreUnavailable
from taskq.domain.job import NewJob

pytestmark = pytest.mark.integration

#: Enough calls of one query for psycopg's default prepare threshold (5) to prepare it.
REPEATS = 8


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_store_from_a_dsn_owns_its_pool_and_closes_it(
    driver: StoreDriver, dsn: str, schema: Schema
) -> None:
    """A store built from a DSN opens its own pool and closes it on close()."""
    store = driver.store(dsn, schema=schema, max_size=2)
    await store.enqueue(NewJob(actor="a"))
    pool = await store.pool()
    assert driver.pool_closed(pool) is False
    await store.close()
    assert driver.pool_closed(pool) is True
    await store.close()  # idempotent


async def test_caller_owned_pool_is_never_closed(
    driver: StoreDriver, dsn: str, schema: Schema
) -> None:
    """A store on the caller's pool uses it, and close() leaves it open and usable."""
    pool = await driver.caller_pool(dsn)
    try:
        store = driver.store(pool, schema=schema)
        result = await store.enqueue(NewJob(actor="a"))
        assert (await store.get(result.job_id)) is not None
        await store.close()
        assert driver.pool_closed(pool) is False
        assert await driver.pool_fetchval(pool, "SELECT 41 + 1") == 42
        with pytest.raises(StoreUnavailable):
            await store.count_active()
    finally:
        await pool.close()


async def test_closed_store_refuses_every_call(
    driver: StoreDriver, dsn: str, schema: Schema
) -> None:
    """After close() a store raises StoreUnavailable instead of reopening a pool."""
    store = driver.store(dsn, schema=schema, max_size=1)
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.enqueue(NewJob(actor="a"))
    with pytest.raises(StoreUnavailable):
        await store.ping()


async def test_unreachable_server_is_store_unavailable(driver: StoreDriver) -> None:
    """Opening a store on a port where nothing listens raises StoreUnavailable naming host:port."""
    port = _closed_port()
    store = driver.store(f"postgresql://postgres@127.0.0.1:{port}/test", max_size=1)
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}"):
        await store.open()
    await store.close()


async def test_taskq_built_connections_run_without_jit(
    driver: StoreDriver, dsn: str, schema: Schema
) -> None:
    """Connections of a TaskQ-built pool have jit off, so dispatch plans never depend on it."""
    store = driver.store(dsn, schema=schema, max_size=1)
    try:
        pool = await store.pool()
        assert await driver.pool_fetchval(pool, "SHOW jit") == "off"
    finally:
        await store.close()


@pytest.mark.parametrize("pooled", [False, True], ids=["direct", "pooled"])
async def test_statements_are_prepared_only_when_not_pooled(
    driver: StoreDriver, dsn: str, schema: Schema, pooled: bool
) -> None:
    """A pooled store (transaction-mode pooler) keeps no prepared statements; a direct one does."""
    store = driver.store(dsn, schema=schema, max_size=1, pooled=pooled)
    try:
        job_id = (await store.enqueue(NewJob(actor="a"))).job_id
        for _ in range(REPEATS):
            await store.get(job_id)
        pool = await store.pool()
        # The needle is split so this query's own text never matches it.
        prepared = await driver.pool_fetchval(
            pool,
            "SELECT count(*) FROM pg_prepared_statements "
            "WHERE strpos(statement, 'j.fairness_key, j.idem' || 'potency_key') > 0",
        )
        if pooled:
            assert prepared == 0
        else:
            assert prepared >= 1
    finally:
        await store.close()
