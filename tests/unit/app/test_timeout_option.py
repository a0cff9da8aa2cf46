"""The attempt timeout option: ``@actor(timeout=...)`` and the per-enqueue ``timeout``
override are validated like the other options (a positive, storable timedelta, the error
naming the option), and the override is stored with the job."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest
from pydantic import BaseModel

from taskq import ConfigurationError, JobsClient
from taskq.adapters.memory import FakeClock
from taskq.app.actors import actor
from taskq.domain.storable import MAX_ATTEMPT_TIMEOUT
from taskq.ports.store_params import ClaimRequest


class Num(BaseModel):
    n: int = 0


@actor(timeout=timedelta(seconds=30))
async def bounded(payload: Num) -> None: ...


BAD = [
    pytest.param(timedelta(0), "must be a positive timedelta", id="zero"),
    pytest.param(timedelta(seconds=-1), "must be a positive timedelta", id="negative"),
    pytest.param(MAX_ATTEMPT_TIMEOUT + timedelta(microseconds=1), "is at most 365,250", id="long"),
    pytest.param(30, "must be a datetime.timedelta", id="a-number"),
]


@pytest.mark.parametrize(("value", "problem"), BAD)
def test_an_actor_timeout_no_attempt_can_have_is_refused_naming_it(
    value: object, problem: str
) -> None:
    """@actor(timeout=...) refuses a value that is not a positive timedelta of at most
    MAX_ATTEMPT_TIMEOUT, with a ConfigurationError naming the actor and the option."""

    async def sample(payload: Num) -> None: ...

    with pytest.raises(ConfigurationError, match=rf"@actor .*sample.*: timeout {problem}"):
        actor(timeout=cast(Any, value))(sample)


def test_the_actor_keeps_its_timeout() -> None:
    """The literal is on the ActorRef (the worker reads it); the job does not store it."""
    assert bounded.timeout == timedelta(seconds=30)
    assert bounded.new_job(Num(), now=FakeClock().now()).attempt_timeout is None


@pytest.mark.parametrize(("value", "problem"), BAD)
async def test_an_enqueue_timeout_no_attempt_can_have_is_refused_naming_it(
    client: JobsClient, value: object, problem: str
) -> None:
    """enqueue and enqueue_many refuse the same values (TypeError for a non-timedelta,
    ValueError otherwise) naming the option; nothing is written."""
    error = TypeError if not isinstance(value, timedelta) else ValueError
    with pytest.raises(error, match=rf"^timeout {problem}"):
        await client.enqueue(bounded, Num(), timeout=cast(Any, value))
    with pytest.raises(error, match=rf"^timeout {problem}"):
        await client.enqueue_many(bounded, [Num(), Num()], timeout=cast(Any, value))
    assert await client.get(1) is None


async def test_the_enqueue_override_is_stored_on_every_job(client: JobsClient) -> None:
    """enqueue, enqueue_many and ActorRef.new_job put the override on the job they write."""
    one = await client.enqueue(bounded, Num(), timeout=timedelta(seconds=5))
    many = await client.enqueue_many(bounded, [Num(), Num(n=1)], timeout=timedelta(minutes=2))
    store: Any = client.store
    claimed = await store.claim(
        ClaimRequest(
            worker_id="w", queues=["default"], actors=["bounded"], limit=10, lease=timedelta(1)
        )
    )
    assert {job.id: job.attempt_timeout for job in claimed} == {
        one.job_id: timedelta(seconds=5),
        many[0].job_id: timedelta(minutes=2),
        many[1].job_id: timedelta(minutes=2),
    }
    job = bounded.new_job(Num(), now=FakeClock().now(), timeout=timedelta(hours=1))
    assert job.attempt_timeout == timedelta(hours=1)
