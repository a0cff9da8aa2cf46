"""Fixtures for worker tests: a fake clock, a memory backend, captured worker logs."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from tests.unit.app.worker.harness import cancel_leftover_workers

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.worker.events import LOGGER_NAME


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def backend(clock: FakeClock) -> MemoryBackend:
    return MemoryBackend(clock=clock)


@pytest.fixture
def client(backend: MemoryBackend) -> MemoryQueueStore:
    """A store for the test itself (the application side: enqueue, read, cancel)."""
    return backend.store()


@pytest.fixture(autouse=True)
def _capture_worker_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER_NAME)


@pytest.fixture(autouse=True)
async def _no_leftover_workers() -> AsyncIterator[None]:
    yield
    await cancel_leftover_workers()
