"""A store whose connections the server terminates (administrator command, failover, a
proxy restart): a statement that meets a dead connection fails with StoreUnavailable
(never a driver error), that connection is not used again, and once each dead
connection has been met, statements run again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.integration.adapters.pg_store_support import StoreDriver

from taskq.adapters.postgres.schema import Schema
from taskq.domain.errors import StoreUnavailable
from taskq.domain.job import NewJob

pytestmark = pytest.mark.integration

APP = "taskq-killed"
ROUNDS = 60
POOL_SIZE = 2


async def test_every_statement_after_a_kill_fails_cleanly_or_succeeds(
    driver: StoreDriver, dsn: str, schema: Schema
) -> None:
    """Kill the store's sessions between statements, with the kept connection idle for
    0 to 2 loop turns: statements raise StoreUnavailable at most once per pooled
    connection, then succeed."""
    separator = "&" if "?" in dsn else "?"
    store: Any = driver.store(
        f"{dsn}{separator}application_name={APP}", schema=schema, max_size=POOL_SIZE
    )
    outcomes: list[str] = []
    try:
        async with driver.caller_connection(dsn) as admin:
            for round_ in range(ROUNDS):
                await store.enqueue(NewJob(actor="a"))  # a connection kept by the store
                await driver.execute(
                    admin,
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    f"WHERE application_name = '{APP}'",
                )
                for _ in range(round_ % 3):
                    await asyncio.sleep(0)
                for _ in range(POOL_SIZE + 1):  # one dead connection each, at most
                    try:
                        assert await store.count_active() == round_ + 1
                    except StoreUnavailable:
                        outcomes.append("unavailable")
                        continue
                    outcomes.append("ok")
                    break
                else:
                    raise AssertionError(f"round {round_}: no statement succeeded ({outcomes})")
    finally:
        await store.close()
    assert "unavailable" in outcomes  # the kills did land on live connections


async def test_a_connection_closed_while_idle_in_the_pool_is_never_used(
    driver: StoreDriver, dsn: str, schema: Schema
) -> None:
    """Sessions the server ended while their connections sat idle in the pool (a moment
    later, their reason already sent) cost no statement a failure: the store skips them."""
    separator = "&" if "?" in dsn else "?"
    store: Any = driver.store(
        f"{dsn}{separator}application_name={APP}", schema=schema, max_size=POOL_SIZE
    )
    try:
        async with driver.caller_connection(dsn) as admin:
            for round_ in range(10):
                # Both pooled connections in use at once, so both are open and idle after.
                await asyncio.gather(store.enqueue(NewJob(actor="a")), store.count_active())
                await asyncio.sleep(0.01)  # the kept connection goes back to the pool
                await driver.execute(
                    admin,
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    f"WHERE application_name = '{APP}'",
                )
                await asyncio.sleep(0.05)  # their reason reaches the client's sockets
                assert await store.count_active() == round_ + 1
    finally:
        await store.close()
