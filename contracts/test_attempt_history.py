"""Attempt history: every ended attempt leaves one record whose outcome names how it ended,
with its start, its end, its error and the error's traceback."""

from __future__ import annotations

from datetime import timedelta

from taskq.domain.job import DEFAULT_QUEUE
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, Finish, Isolation, Reschedule
from taskq.testing.harness import Harness

from .helpers import (
    LEASE,
    at,
    claim_one,
    enqueue_and_claim,
    get,
    new_job,
    register,
)

#: A traceback as the worker stores it (several lines, a non-ASCII character).
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "app/actors.py", line 12, in resize\n'
    "    data = fetch(payload.url)\n"
    "ConnectionError: refusé\n"
)


async def _outcomes(harness: Harness, job_id: int) -> list[str]:
    return [record.outcome for record in await harness.store.attempts(job_id)]


async def test_terminal_writes_record_the_status_as_outcome(harness: Harness) -> None:
    """A terminal write records an attempt whose outcome is the terminal status's value."""
    store = harness.store
    for status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED):
        claimed = await enqueue_and_claim(store, new_job(actor=f"a-{status.value}"))
        await store.finish(Finish(lease=claimed.lease, status=status, now=at(1)))
        assert await _outcomes(harness, claimed.id) == [status.value]


async def test_reschedules_record_retried_snoozed_and_released(harness: Harness) -> None:
    """A retry records "retried", a snooze "snoozed" and a release "released", in order."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.reschedule(Reschedule(lease=claimed.lease, run_at=at(1), now=at(1)))
    again = await claim_one(store, now=at(1))
    await store.reschedule(Reschedule(lease=again.lease, run_at=at(2), snooze=True, now=at(2)))
    third = await claim_one(store, now=at(2))
    await store.release(third.lease, delay=timedelta(0), now=at(3))
    assert await _outcomes(harness, claimed.id) == ["retried", "snoozed", "released"]


async def test_sweeps_record_lease_expired_and_interrupted(harness: Harness) -> None:
    """A reclaimed lease records "lease_expired"; an isolated worker's job "interrupted"."""
    store = harness.store
    expired = await enqueue_and_claim(store, new_job(actor="x"))
    await store.reclaim_expired(now=at(0) + LEASE + timedelta(seconds=1))
    assert await _outcomes(harness, expired.id) == ["lease_expired"]

    await register(store, "w9")
    isolated = await enqueue_and_claim(store, new_job(actor="y"), worker="w9")
    await store.isolate_worker(
        Isolation(worker_id="w9", retryable_actors=["y"], retry_at=at(5), now=at(1))
    )
    assert await _outcomes(harness, isolated.id) == ["interrupted"]


async def test_a_failed_attempt_keeps_its_traceback_and_its_start(harness: Harness) -> None:
    """A failed terminal write stores the traceback with the attempt; the history returns it
    with the attempt's start (its start mark) and end."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    await store.mark_started([claimed.lease], now=at(1))
    await store.finish(
        Finish(
            lease=claimed.lease,
            status=JobStatus.FAILED,
            error="refusé",
            error_class="ConnectionError",
            traceback=TRACEBACK,
            now=at(3),
        )
    )
    [record] = await store.attempts(claimed.id)
    assert (record.outcome, record.error_class, record.error) == (
        "failed",
        "ConnectionError",
        "refusé",
    )
    assert record.traceback == TRACEBACK
    assert (record.worker_id, record.started_at, record.finished_at) == ("w1", at(1), at(3))


async def test_a_retried_attempt_keeps_its_traceback(harness: Harness) -> None:
    """A retry stores the traceback with its attempt; the start it fills from started_ago
    (no start mark landed) is the attempt's start; a snooze and a release keep none."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    await store.reschedule(
        Reschedule(
            lease=claimed.lease,
            run_at=at(5),
            error="refusé",
            error_class="ConnectionError",
            traceback=TRACEBACK,
            started_ago=timedelta(seconds=2),
            now=at(5),
        )
    )
    again = await claim_one(store, now=at(5))
    await store.reschedule(Reschedule(lease=again.lease, run_at=at(6), snooze=True, now=at(6)))
    third = await claim_one(store, now=at(6))
    await store.release(third.lease, delay=timedelta(0), now=at(7))
    retried, snoozed, released = await store.attempts(claimed.id)
    assert (retried.outcome, retried.traceback) == ("retried", TRACEBACK)
    assert (retried.started_at, retried.finished_at) == (at(3), at(5))
    assert (snoozed.outcome, snoozed.traceback) == ("snoozed", None)
    assert (released.outcome, released.traceback, released.started_at) == ("released", None, None)


async def test_a_succeeded_attempt_has_its_start_and_no_traceback(harness: Harness) -> None:
    """The success at the end of a history has its worker, start and end, and no error."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    await store.mark_started([claimed.lease], now=at(2))
    await store.finish(Finish(lease=claimed.lease, status=JobStatus.SUCCEEDED, now=at(4)))
    [record] = await store.attempts(claimed.id)
    assert (record.outcome, record.worker_id, record.started_at, record.finished_at) == (
        "succeeded",
        "w1",
        at(2),
        at(4),
    )
    assert (record.error_class, record.error, record.traceback) == (None, None, None)


async def test_finish_and_claim_keeps_each_writes_traceback(harness: Harness) -> None:
    """Terminal writes riding with a claim store each attempt's own traceback (or none)."""
    store = harness.store
    one = await enqueue_and_claim(store, new_job(payload={"i": 1}))
    two = await enqueue_and_claim(store, new_job(payload={"i": 2}))
    three = await enqueue_and_claim(store, new_job(payload={"i": 3}))
    lost, _ = await store.finish_and_claim(
        [
            Finish(lease=one.lease, status=JobStatus.FAILED, error="a", traceback="tb one\n"),
            Finish(lease=two.lease, status=JobStatus.SUCCEEDED, now=at(5)),
            Finish(lease=three.lease, status=JobStatus.CANCELLED, error="c", now=at(5)),
        ],
        ClaimRequest(
            worker_id="w1", queues=[DEFAULT_QUEUE], actors=["a"], limit=1, lease=LEASE, now=at(5)
        ),
    )
    assert lost == []
    tracebacks = [[r.traceback for r in await store.attempts(c.id)] for c in (one, two, three)]
    assert tracebacks == [["tb one\n"], [None], [None]]


async def test_a_traceback_no_store_can_keep_is_stored_escaped(harness: Harness) -> None:
    """A NUL or a lone surrogate in a traceback (the actor's words) is written visibly."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.finish(
        Finish(
            lease=claimed.lease,
            status=JobStatus.FAILED,
            error="x",
            traceback="Traceback:\n  bad \x00 byte \udcff\nX: x\n",
            now=at(2),
        )
    )
    [record] = await store.attempts(claimed.id)
    assert record.traceback == "Traceback:\n  bad \\x00 byte \\udcff\nX: x\n"


async def test_a_success_clears_an_earlier_attempts_error(harness: Harness) -> None:
    """A job that succeeds after a failed attempt shows no last_error; its history still
    holds the failed attempt's error and traceback."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.reschedule(
        Reschedule(
            lease=claimed.lease,
            run_at=at(1),
            error="refusé",
            error_class="ConnectionError",
            traceback=TRACEBACK,
            now=at(1),
        )
    )
    assert (await get(store, claimed.id)).last_error == "refusé"
    again = await claim_one(store, now=at(1))
    await store.finish(Finish(lease=again.lease, status=JobStatus.SUCCEEDED, now=at(2)))
    got = await get(store, claimed.id)
    assert (got.status, got.last_error) == (JobStatus.SUCCEEDED, None)
    history = await store.attempts(claimed.id)
    assert [(r.outcome, r.error, r.traceback) for r in history] == [
        ("retried", "refusé", TRACEBACK),
        ("succeeded", None, None),
    ]
