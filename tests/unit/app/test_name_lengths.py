"""Queue and actor names, and keys, too long for a store's index are refused up front.

Postgres refuses an index entry over 2,704 bytes with its own error (asyncpg's
ProgramLimitExceededError escaped the store, naming an index, not the field). The
limits (200 characters a name, 400 a key) are refused where they are given: at
import for ``@actor``, at load for ``TASKQ_QUEUES``, at enqueue for the rest.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from taskq import JobsClient, WorkerSettings, actor
from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.domain.errors import ConfigurationError
from taskq.domain.storable import MAX_KEY_LENGTH, MAX_NAME_LENGTH


class Num(BaseModel):
    n: int


def test_an_actor_name_or_queue_too_long_is_refused_at_import() -> None:
    with pytest.raises(ConfigurationError, match=r"queue is 201 characters; at most 200"):

        @actor(queue="q" * (MAX_NAME_LENGTH + 1))
        async def long_queue(payload: Num) -> None: ...

    with pytest.raises(ConfigurationError, match=r"name is 201 characters; at most 200"):

        @actor(name="a" * (MAX_NAME_LENGTH + 1))
        async def long_name(payload: Num) -> None: ...

    @actor(name="a" * MAX_NAME_LENGTH, queue="q" * MAX_NAME_LENGTH)
    async def at_the_limit(payload: Num) -> None: ...

    assert (len(at_the_limit.name), len(at_the_limit.queue)) == (MAX_NAME_LENGTH, MAX_NAME_LENGTH)


def test_a_worker_queue_too_long_is_refused_naming_the_variable() -> None:
    with pytest.raises(ConfigurationError, match=r"TASKQ_QUEUES: a queue name is at most 200"):
        WorkerSettings.load_from_dict({"queues": ["ok", "x" * (MAX_NAME_LENGTH + 1)]})
    settings = WorkerSettings.load_from_dict({"queues": ["x" * MAX_NAME_LENGTH]})
    assert settings.queues == ["x" * MAX_NAME_LENGTH]


@actor
async def ping(payload: Num) -> None:
    return None


async def test_an_enqueue_with_a_key_too_long_says_which_and_how_to_fix_it() -> None:
    client = JobsClient(MemoryBackend(clock=FakeClock()).store())
    with pytest.raises(
        ValueError,
        match=(
            r"^actor 'ping': the job cannot be stored: NewJob.idempotency_key is 1,000 "
            r"characters; at most 400 fit a store's index \(hash a longer key\)"
        ),
    ):
        await client.enqueue(ping, {"n": 1}, idempotency_key="k" * 1_000)
    handle = await client.enqueue(ping, {"n": 1}, idempotency_key="k" * MAX_KEY_LENGTH)
    assert not handle.was_existing
