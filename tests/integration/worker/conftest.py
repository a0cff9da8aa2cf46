"""Fixtures for real ``taskq worker`` processes on a real Postgres, once per driver."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from tests.integration.worker.support import (
    DRIVERS,
    Database,
    WorkerSpawner,
    connected_client,
    fresh_database,
)

from taskq import JobsClient


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest) -> str:
    """The Postgres driver the workers and the client use: every test runs on both."""
    return str(request.param)


@pytest.fixture
async def db(driver: str) -> AsyncIterator[Database]:
    """A fresh migrated schema with the side-effect table; dropped after the test."""
    async with fresh_database(driver, "taskq_wk") as database:
        yield database


@pytest.fixture
async def conn(db: Database) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection for the test's own reads of the schema."""
    connection = await asyncpg.connect(db.dsn)
    try:
        yield connection
    finally:
        await connection.close()


@pytest.fixture
async def client(db: Database) -> AsyncIterator[JobsClient]:
    """A jobs client on the test schema, with the test's driver."""
    async with connected_client(db) as jobs_client:
        yield jobs_client


@pytest.fixture
def workers(db: Database, tmp_path: Path) -> Iterator[WorkerSpawner]:
    """Starts worker processes; any still alive are killed before the schema is dropped."""
    spawner = WorkerSpawner(tmp_path / "workers")
    try:
        yield spawner
    finally:
        spawner.cleanup()
