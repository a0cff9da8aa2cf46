"""A job's own attempt timeout (``NewJob.attempt_timeout``) is stored as given, exact to the
microsecond, on every enqueue path, and every claim hands it back with the job
(``ClaimedJob.attempt_timeout``), as does a read (``Job.attempt_timeout``); a job
without one comes back with None. A value no
attempt can be bounded by is refused, naming the field, and nothing is stored."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from taskq.domain.actor_config import ActorConfig, QueueMode
from taskq.domain.job import ClaimedJob, NewJob, UniformJobs
from taskq.domain.storable import MAX_ATTEMPT_TIMEOUT
from taskq.testing.harness import Harness

from .helpers import at, claim, get, new_job

#: Days, seconds and microseconds: every part of a timedelta must survive the round trip.
ODD = timedelta(days=2, seconds=3_723, microseconds=7)
#: Over every store's threshold for its bulk path (Postgres: COPY from 200 jobs).
BIG = 250


async def _claim_all(
    harness: Harness, *, queues: Sequence[str] = ("default",), now: datetime | None = None
) -> dict[int, Any]:
    """Every due job of actor a, claimed (up to 1,000) at ``now`` (None: on the store's own
    clock, for jobs enqueued on it, whatever year the store's clock reads); their stored
    timeouts by id."""
    claimed: list[ClaimedJob] = await claim(
        harness.store, queues=queues, actors=("a",), limit=1_000, now=now
    )
    return {job.id: job.attempt_timeout for job in claimed}


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="plain"),
        pytest.param({"metadata": {"k": 1}, "tags": ("t",)}, id="with-options"),
        pytest.param({"identity_key": "k1"}, id="identity-key"),
        pytest.param({"idempotency_key": "k2"}, id="idempotency-key"),
        pytest.param({"max_pending": 10}, id="max-pending"),
    ],
)
@pytest.mark.parametrize("clock", ["given", "store"], ids=["now-given", "store-clock"])
async def test_a_single_enqueue_stores_the_timeout_and_the_claim_returns_it(
    harness: Harness, fields: dict[str, Any], clock: str
) -> None:
    """enqueue (each single path: plain, keyed, max_pending; on a given or the store's
    clock) keeps the timeout, and a claim returns it."""
    now = at(0) if clock == "given" else None
    timed = await harness.store.enqueue(new_job(attempt_timeout=ODD, **fields), now=now)
    untimed = await harness.store.enqueue(new_job(**(fields | _other_keys(fields))), now=now)
    assert (await get(harness.store, timed.job_id)).attempt_timeout == ODD
    assert (await get(harness.store, untimed.job_id)).attempt_timeout is None
    claim_now = None if now is None else at(1)
    assert await _claim_all(harness, now=claim_now) == {timed.job_id: ODD, untimed.job_id: None}


def _other_keys(fields: dict[str, Any]) -> dict[str, Any]:
    """The same path for a second job, with keys of its own (not a duplicate)."""
    return {key: f"{value}-other" for key, value in fields.items() if key.endswith("_key")}


@pytest.mark.parametrize("size", [3, BIG], ids=["batch", "bulk"])
@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="plain"),
        pytest.param({"identity_key": True}, id="keyed"),
        pytest.param({"max_pending": 1_000}, id="max-pending"),
    ],
)
async def test_enqueue_many_stores_each_jobs_own_timeout(
    harness: Harness, size: int, fields: dict[str, Any]
) -> None:
    """enqueue_many (insert, bulk, keyed and max_pending paths) keeps each job's timeout,
    None where a job has none, in a batch that mixes both."""
    jobs: list[NewJob] = []
    for i in range(size):
        options: dict[str, Any] = {"payload": {"i": i}}
        if i % 3 != 2:
            options["attempt_timeout"] = ODD + timedelta(seconds=i % 3)
        if fields.get("identity_key"):
            options["identity_key"] = f"key-{i}"
        if "max_pending" in fields:
            options["max_pending"] = fields["max_pending"]
        jobs.append(new_job(**options))
    results = await harness.store.enqueue_many(jobs, now=at(0))
    found = await _claim_all(harness, now=at(1))
    assert found == {r.job_id: job.attempt_timeout for r, job in zip(results, jobs, strict=True)}


@pytest.mark.parametrize("size", [3, BIG], ids=["batch", "bulk"])
async def test_a_uniform_batch_stores_its_templates_timeout(harness: Harness, size: int) -> None:
    """enqueue_many of a UniformJobs batch (what JobsClient.enqueue_many sends) gives every
    job the template's timeout."""
    jobs = UniformJobs(new_job(attempt_timeout=ODD), [{"i": i} for i in range(size)])
    results = await harness.store.enqueue_many(jobs, now=at(0))
    assert await _claim_all(harness, now=at(1)) == {r.job_id: ODD for r in results}


@pytest.mark.parametrize("claim_path", ["one-queue", "two-queues", "capped", "round-robin"])
async def test_every_claim_returns_the_timeout(harness: Harness, claim_path: str) -> None:
    """Each claim statement (one queue with its writes, several queues, a capped actor, a
    round_robin queue) returns the stored timeout."""
    store = harness.store
    queues: tuple[str, ...] = ("default",)
    if claim_path == "two-queues":
        queues = ("default", "other")
    elif claim_path == "capped":
        await store.sync_actor_configs([ActorConfig(actor="a", queue="default", max_concurrent=5)])
    elif claim_path == "round-robin":
        await store.set_queue_mode("default", QueueMode.ROUND_ROBIN)
    results = await store.enqueue_many(
        [
            new_job(attempt_timeout=ODD, fairness_key="t1"),
            new_job(fairness_key="t2"),
            new_job(attempt_timeout=MAX_ATTEMPT_TIMEOUT),
        ],
        now=at(0),
    )
    found = await _claim_all(harness, queues=queues, now=at(1))
    assert found == dict(
        zip([r.job_id for r in results], [ODD, None, MAX_ATTEMPT_TIMEOUT], strict=True)
    )


@pytest.mark.parametrize(
    "value",
    [timedelta(0), timedelta(microseconds=-1), MAX_ATTEMPT_TIMEOUT + timedelta(microseconds=1)],
    ids=["zero", "negative", "too-long"],
)
@pytest.mark.parametrize("size", [1, BIG], ids=["one", "bulk"])
async def test_a_timeout_no_attempt_can_have_is_refused(
    harness: Harness, value: timedelta, size: int
) -> None:
    """Zero, negative and over-long timeouts raise ValueError naming the field; nothing is
    stored, singly or in a batch."""
    store = harness.store
    bad = new_job(attempt_timeout=value)
    others = [new_job(payload={"i": i}) for i in range(size - 1)]
    call = store.enqueue(bad, now=at(0)) if size == 1 else store.enqueue_many([*others, bad])
    with pytest.raises(ValueError, match=r"NewJob\.attempt_timeout"):
        await call
    assert await store.count_active() == 0
