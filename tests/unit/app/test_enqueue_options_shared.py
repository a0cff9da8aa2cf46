"""``JobsClient.enqueue``, ``JobsClient.enqueue_many`` and ``ActorRef.new_job`` take one
set of enqueue options (``EnqueueOptions``) and check it the same way.

Each test fails when one entry point drifts: an option added to, renamed in or
checked differently by one of them, or a new option with no bad value below.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from pydantic import BaseModel

from taskq.adapters.memory import FakeClock
from taskq.app.actors import ActorRef, actor
from taskq.app.actors.enqueue_options import EnqueueArgs, EnqueueOptions
from taskq.app.client import ClientStore, JobsClient
from taskq.domain.job import EnqueueResult, Job, NewJob
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus

OPTIONS = {f.name for f in dataclasses.fields(EnqueueOptions)}
#: What each entry point takes besides the payload(s) and the enqueue options.
OWN_PARAMETERS: Mapping[Callable[..., Any], set[str]] = {
    JobsClient.enqueue: {"connection"},
    JobsClient.enqueue_many: {"connection"},
    ActorRef.new_job: {"now"},
}
NOW = datetime(2026, 1, 1, tzinfo=UTC)
#: After the deadline ``ping``'s time_budget sets: refused only once there is a job to check.
TOO_LATE = NOW + timedelta(hours=2)


class Num(BaseModel):
    n: int = 0


@actor(retry=RetryPolicy(kind="indefinite", time_budget=timedelta(hours=1)))
async def ping(payload: Num) -> None: ...


class Recorder:
    """A client store that keeps the jobs it is given and writes nothing."""

    def __init__(self) -> None:
        self.jobs: list[NewJob] = []

    async def enqueue(self, job: NewJob, *, now: datetime | None = None) -> EnqueueResult:
        self.jobs.append(job)
        return EnqueueResult(job_id=len(self.jobs))

    async def enqueue_many(
        self, jobs: Sequence[NewJob], *, now: datetime | None = None
    ) -> list[EnqueueResult]:
        self.jobs.extend(jobs)
        return [EnqueueResult(job_id=i + 1) for i in range(len(jobs))]

    async def get(self, job_id: int) -> Job | None:
        return None

    async def request_cancel(self, job_id: int, *, now: datetime | None = None) -> JobStatus:
        raise NotImplementedError

    async def close(self) -> None:
        pass


def _client(store: Recorder) -> JobsClient:
    # Recorder has the methods a client calls, not every read a ClientStore declares.
    return JobsClient(cast(ClientStore, store), clock=FakeClock(NOW), otel_enabled=False)


def _accepted(entry_point: Callable[..., Any]) -> set[str]:
    """The keyword options ``entry_point`` takes: its keyword-only parameters and the
    keys of the TypedDict its ``**`` parameter unpacks, less its own parameters."""
    hints = typing.get_type_hints(entry_point)
    names: set[str] = set()
    for param in inspect.signature(entry_point).parameters.values():
        if param.kind is inspect.Parameter.KEYWORD_ONLY:
            names.add(param.name)
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            (typed_dict,) = typing.get_args(hints[param.name])  # Unpack[...]
            names |= set(typed_dict.__annotations__)
    return names - OWN_PARAMETERS[entry_point]


@pytest.mark.parametrize("entry_point", list(OWN_PARAMETERS), ids=lambda f: f.__qualname__)
def test_every_entry_point_takes_exactly_the_enqueue_options(
    entry_point: Callable[..., Any],
) -> None:
    assert _accepted(entry_point) == OPTIONS


def test_the_keyword_arguments_are_typed_as_the_options_are() -> None:
    assert typing.get_type_hints(EnqueueArgs) == typing.get_type_hints(EnqueueOptions)
    assert not EnqueueArgs.__required_keys__  # every option has a default


#: One bad value per option (the test below checks every option has one).
BAD_VALUES: list[tuple[str, object]] = [
    ("queue", ""),
    ("queue", 5),
    ("scheduled_at", timedelta(minutes=5)),
    ("scheduled_at", datetime(2026, 1, 1)),  # naive
    ("scheduled_at", TOO_LATE),
    ("priority", "1"),
    ("priority", True),
    ("schedule_to_close", "tomorrow"),
    ("schedule_to_close", datetime(2026, 1, 1)),  # naive
    ("identity_key", 5),
    ("fairness_key", b"k"),
    ("idempotency_key", 1.5),
    ("metadata", {"ratio": float("nan")}),
    ("metadata", {1: "a"}),
    ("tags", "abc"),
    ("tags", [1, 2]),
    ("trace_id", 7),
    ("span_id", object()),
    ("timeout", timedelta(0)),
    ("timeout", 30),
]


def test_every_option_has_a_bad_value_below() -> None:
    assert {option for option, _ in BAD_VALUES} == OPTIONS


def _refusal(call: Callable[[], object]) -> tuple[type[BaseException], str]:
    with pytest.raises((TypeError, ValueError)) as caught:
        call()
    return type(caught.value), str(caught.value)


async def _refusal_async(call: Callable[[], Any]) -> tuple[type[BaseException], str]:
    with pytest.raises((TypeError, ValueError)) as caught:
        await call()
    return type(caught.value), str(caught.value)


@pytest.mark.parametrize(
    ("option", "value"),
    BAD_VALUES,
    ids=[f"{option}-{i}" for i, (option, _) in enumerate(BAD_VALUES)],
)
async def test_every_entry_point_refuses_a_bad_option_alike(option: str, value: object) -> None:
    """The same error, word for word, from each entry point, a batch of none included;
    nothing reaches the store."""
    options: Any = {option: value}
    store = Recorder()
    client = _client(store)
    expected = _refusal(lambda: ping.new_job(Num(), now=NOW, **options))
    assert await _refusal_async(lambda: client.enqueue(ping, Num(), **options)) == expected
    assert await _refusal_async(lambda: client.enqueue_many(ping, [Num()], **options)) == expected
    if value is not TOO_LATE:
        assert await _refusal_async(lambda: client.enqueue_many(ping, [], **options)) == expected
    assert store.jobs == []


async def test_every_entry_point_makes_the_same_job_of_the_same_options() -> None:
    options: EnqueueArgs = {
        "queue": "other",
        "scheduled_at": NOW + timedelta(minutes=5),
        "priority": 3,
        "schedule_to_close": NOW + timedelta(minutes=30),
        "identity_key": "i",
        "fairness_key": "f",
        "idempotency_key": "k",
        "metadata": {"tenant": "acme", "ids": [1, 2]},
        "tags": ("billing", "eu"),
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": "b7ad6b7169203331",
        "timeout": timedelta(seconds=30),
    }
    assert set(options) == OPTIONS
    expected = ping.new_job(Num(n=1), now=NOW, **options)
    store = Recorder()
    client = _client(store)
    await client.enqueue(ping, Num(n=1), **options)
    await client.enqueue_many(ping, [Num(n=1)], **options)
    assert store.jobs == [expected, expected]


async def test_an_unknown_option_is_refused_alike() -> None:
    options: Any = {"prioriy": 1}
    client = _client(Recorder())
    expected = _refusal(lambda: ping.new_job(Num(), now=NOW, **options))
    assert expected[0] is TypeError
    assert "'prioriy'" in expected[1]
    assert await _refusal_async(lambda: client.enqueue(ping, Num(), **options)) == expected
    assert await _refusal_async(lambda: client.enqueue_many(ping, [Num()], **options)) == expected
