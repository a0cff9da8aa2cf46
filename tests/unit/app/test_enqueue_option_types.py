"""Enqueue options of the wrong type are refused naming the option; tags given as a
one-shot iterable are read once and kept."""

from __future__ import annotations

from typing import Any, cast

import pytest
from pydantic import BaseModel

from taskq import JobsClient
from taskq.adapters.memory import FakeClock
from taskq.app.actors import actor


class Num(BaseModel):
    n: int = 0


@actor
async def ping(payload: Num) -> None: ...


async def test_tags_from_a_generator_are_kept(client: JobsClient) -> None:
    """Before, the type check consumed the generator and the job kept no tags."""
    handle = await client.enqueue(ping, Num(), tags=(t.lower() for t in ["Billing", "EU"]))
    stored = await client.get(handle.job_id)
    assert stored is not None
    assert tuple(stored.tags) == ("billing", "eu")
    handles = await client.enqueue_many(ping, [Num(), Num()], tags=map(str.lower, ["A", "B"]))
    for h in handles:
        stored = await client.get(h.job_id)
        assert stored is not None
        assert tuple(stored.tags) == ("a", "b")


@pytest.mark.parametrize(
    "option", ["identity_key", "idempotency_key", "fairness_key", "trace_id", "span_id"]
)
async def test_a_text_option_of_another_type_is_refused_naming_it(
    client: JobsClient, option: str
) -> None:
    with pytest.raises(TypeError, match=rf"^{option} must be a str or None, got int 5$"):
        await client.enqueue(ping, Num(), **cast(Any, {option: 5}))
    assert await client.get(1) is None


@pytest.mark.parametrize("tags", [[1, 2], "abc", 5])
def test_tags_that_are_not_strings_are_refused(tags: object) -> None:
    with pytest.raises(TypeError, match=r"^tags must be an iterable of strings"):
        ping.new_job(Num(), now=FakeClock().now(), tags=cast(Any, tags))
