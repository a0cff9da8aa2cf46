"""JobsClient.attempts: a job's attempt history through the client."""

from __future__ import annotations

import pytest
from tests.unit.app.worker.custom_ports import Without

from taskq import ConfigurationError, JobsClient
from taskq.adapters.memory import FakeClock, MemoryBackend


async def test_attempts_of_an_unknown_job_are_empty(client: JobsClient) -> None:
    """A job id no job has reads as an empty history, as the store's read does."""
    assert await client.attempts(12345) == []


async def test_a_store_without_a_history_says_so() -> None:
    """A custom store may lack attempts(): the client's read then names what is missing."""
    store = Without(MemoryBackend(clock=FakeClock()).store(), "attempts")
    with pytest.raises(ConfigurationError, match=r"Without has no attempts\(\)"):
        await JobsClient(store).attempts(1)
