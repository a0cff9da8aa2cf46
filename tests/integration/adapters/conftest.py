"""Fixtures the Postgres store tests share: the driver under test, DSN, emptied schema, a store.

Modules that need other fixtures of these names (the lock and notifier
tests) define their own, which take precedence.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from contracts.factories.postgres_common import empty_tables, session_schema
from contracts.provision import NoTestDatabase, resolve_test_dsn
from tests.integration.adapters.pg_store_support import DRIVERS, StoreDriver

from taskq.adapters.asyncpg import migrate
from taskq.adapters.postgres.schema import Schema


@pytest.fixture(params=DRIVERS, ids=lambda d: d.name)
def driver(request: pytest.FixtureRequest) -> StoreDriver:
    """The driver under test: every test runs on both."""
    spec: StoreDriver = request.param
    return spec


@pytest.fixture
def dsn() -> str:
    try:
        return resolve_test_dsn()
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


@pytest.fixture
async def schema(dsn: str) -> Schema:
    """The shared test schema, emptied."""
    schema = await session_schema(dsn)
    async with migrate.open_connection(dsn) as conn:
        await empty_tables(conn, schema)
    return schema


@pytest.fixture
async def store(driver: StoreDriver, dsn: str, schema: Schema) -> AsyncIterator[Any]:
    """A store of the driver under test on ``schema``, on a pool of its own."""
    opened = driver.store(dsn, schema=schema, max_size=4)
    try:
        yield opened
    finally:
        await opened.close()
