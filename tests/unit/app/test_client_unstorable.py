"""A value no store can keep: the client's error names the actor and where it is."""

from __future__ import annotations

import math

import pytest
from pydantic import BaseModel

from taskq import JobsClient
from taskq.app.actors import actor
from taskq.app.unstorable import find_unstorable


class Reading(BaseModel):
    value: float
    labels: list[str] = []


@actor
async def record(payload: Reading) -> None: ...


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        (Reading(value=math.nan), "payload['value'] is nan"),
        (Reading(value=-math.inf), "payload['value'] is -inf"),
        (Reading(value=1, labels=["ok", "b\x00d"]), "payload['labels'][1] holds a NUL"),
    ],
    ids=["nan", "inf", "nul"],
)
async def test_enqueue_names_the_actor_and_the_value(
    client: JobsClient, payload: Reading, where: str
) -> None:
    with pytest.raises(ValueError, match="actor 'record': the job cannot be stored") as caught:
        await client.enqueue(record, payload)
    assert where in str(caught.value)
    assert await client.get(1) is None  # nothing written


async def test_enqueue_many_names_the_payload_by_its_index(client: JobsClient) -> None:
    payloads = [Reading(value=1), Reading(value=2), Reading(value=3, labels=["\ud800"])]
    with pytest.raises(ValueError, match="the batch cannot be stored") as caught:
        await client.enqueue_many(record, payloads)
    assert "payload #2['labels'][0] holds a lone surrogate" in str(caught.value)


def test_find_unstorable_walks_mappings_and_sequences() -> None:
    assert find_unstorable({"a": [1, {"b": 2.5}], "c": "fine"}, "x") is None
    assert find_unstorable({"a": [1, {"b": math.inf}]}, "x") == (
        "x['a'][1]['b'] is inf (JSON has no NaN or infinity)"
    )
    assert find_unstorable({"k\x00": 1}, "x") == "x has a key that holds a NUL character"
