"""Fixtures for the jobs client on a real Postgres, once per driver."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests.integration.worker.support import DRIVERS, Database, fresh_database


@pytest.fixture(params=DRIVERS)
def driver(request: pytest.FixtureRequest) -> str:
    """The Postgres driver under test: every client test runs on both."""
    return str(request.param)


@pytest.fixture
async def db(driver: str) -> AsyncIterator[Database]:
    """A fresh migrated schema for the test; dropped afterwards."""
    async with fresh_database(driver, "taskq_cl") as database:
        yield database
