"""Fixtures shared by the app layer's unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from taskq import JobsClient
from taskq.adapters.memory import FakeClock, MemoryBackend


@pytest.fixture
async def client() -> AsyncIterator[JobsClient]:
    """A client on a fresh in-memory store with a fake clock."""
    clock = FakeClock()
    async with JobsClient(MemoryBackend(clock=clock).store(), clock=clock) as jobs_client:
        yield jobs_client
