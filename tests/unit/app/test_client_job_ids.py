"""A job id that is not an int is refused where it is given: ``client.handle``, ``get``,
``cancel``; one beyond any stored id finds nothing (as on Postgres, see contracts)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.app.actors import actor
from taskq.app.client import JobsClient
from taskq.domain.errors import JobNotFound


class Ping(BaseModel):
    n: int = 0


@actor
async def ping(payload: Ping) -> None:
    return None


async def test_handle_refuses_an_id_that_is_not_an_int_at_once() -> None:
    clock = FakeClock()
    client = JobsClient(MemoryBackend(clock=clock).store(), clock=clock)
    for wrong in ("abc", 1.5, None):
        with pytest.raises(TypeError, match="job_id must be an int"):
            client.handle(ping, wrong)  # type: ignore[arg-type]


@pytest.mark.parametrize("wrong", ["7", None], ids=repr)
async def test_get_and_cancel_refuse_an_id_that_is_not_an_int(wrong: Any) -> None:
    clock = FakeClock()
    client = JobsClient(MemoryBackend(clock=clock).store(), clock=clock)
    with pytest.raises(TypeError, match="job_id must be an int"):
        await client.get(wrong)
    with pytest.raises(TypeError, match="job_id must be an int"):
        await client.cancel(wrong)


async def test_an_id_beyond_bigint_is_not_found() -> None:
    clock = FakeClock()
    client = JobsClient(MemoryBackend(clock=clock).store(), clock=clock)
    assert await client.get(2**63) is None
    with pytest.raises(JobNotFound):
        await client.handle(ping, 2**63).wait(timeout=1)
