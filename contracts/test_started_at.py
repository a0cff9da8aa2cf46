"""started_at of an attempt whose start mark is written late, or never.

A worker does not wait for a start mark before it runs a short job: the mark
is sent only for jobs still running a moment later, and a terminal write or a
reschedule carries how long ago the attempt began (``started_ago``). Either
way ``started_at`` is the time the attempt began, never the time of the write.
A start mark that already landed wins over a later ``started_ago``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish, Reschedule
from taskq.testing.harness import Harness

from .helpers import at, enqueue_and_claim, get


async def test_finish_without_a_mark_records_when_the_attempt_began(harness: Harness) -> None:
    """finish(started_ago=2s) at t=9 of an unmarked attempt stores started_at = t=7."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    await store.finish(
        Finish(
            lease=claimed.lease,
            status=JobStatus.SUCCEEDED,
            started_ago=timedelta(seconds=2),
            now=at(9),
        )
    )
    got = await get(store, claimed.id)
    assert got.started_at == at(7)
    assert got.finished_at == at(9)


async def test_finish_many_fills_each_unmarked_start(harness: Harness) -> None:
    """Each outcome of a batch carries its own started_ago."""
    store = harness.store
    first = await enqueue_and_claim(store, started=False)
    second = await enqueue_and_claim(store, started=False)
    lost = await store.finish_many(
        [
            Finish(
                lease=first.lease,
                status=JobStatus.SUCCEEDED,
                started_ago=timedelta(seconds=1),
                now=at(10),
            ),
            Finish(
                lease=second.lease,
                status=JobStatus.FAILED,
                error="boom",
                started_ago=timedelta(milliseconds=250),
                now=at(10),
            ),
        ]
    )
    assert lost == []
    assert (await get(store, first.id)).started_at == at(9)
    assert (await get(store, second.id)).started_at == at(9.75)


async def test_a_landed_mark_wins_over_started_ago(harness: Harness) -> None:
    """started_ago never moves a start mark that was already written."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    await store.mark_started([claimed.lease], now=at(3))
    await store.finish(
        Finish(
            lease=claimed.lease,
            status=JobStatus.SUCCEEDED,
            started_ago=timedelta(seconds=1),
            now=at(9),
        )
    )
    assert (await get(store, claimed.id)).started_at == at(3)


async def test_finish_without_mark_or_started_ago_leaves_started_at_empty(
    harness: Harness,
) -> None:
    """Without either, nothing is invented: started_at stays unset."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    await store.finish(Finish(lease=claimed.lease, status=JobStatus.CANCELLED, now=at(4)))
    assert (await get(store, claimed.id)).started_at is None


async def test_late_mark_records_when_the_attempt_began(harness: Harness) -> None:
    """mark_started(started_ago=[...]) at t=5 stores now - ago per lease."""
    store = harness.store
    first = await enqueue_and_claim(store, started=False)
    second = await enqueue_and_claim(store, started=False)
    lost = await store.mark_started(
        [first.lease, second.lease],
        now=at(5),
        started_ago=[timedelta(milliseconds=200), timedelta(seconds=1)],
    )
    assert lost == []
    assert (await get(store, first.id)).started_at == at(4.8)
    assert (await get(store, second.id)).started_at == at(4)


async def test_mark_started_refuses_misaligned_started_ago(harness: Harness) -> None:
    """One started_ago per lease, or a ValueError and nothing written."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    with pytest.raises(ValueError, match="started_ago"):
        await store.mark_started([claimed.lease], now=at(5), started_ago=[])
    assert (await get(store, claimed.id)).started_at is None


async def test_negative_started_ago_is_refused(harness: Harness) -> None:
    """A start after the write is impossible: ValueError, nothing written."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    with pytest.raises(ValueError, match="started_ago"):
        await store.finish(
            Finish(
                lease=claimed.lease,
                status=JobStatus.SUCCEEDED,
                started_ago=timedelta(seconds=-1),
                now=at(9),
            )
        )
    got = await get(store, claimed.id)
    assert got.status is JobStatus.RUNNING


async def test_reschedule_without_a_mark_records_when_the_attempt_began(
    harness: Harness,
) -> None:
    """A retry of an unmarked attempt keeps the attempt's start on the job row."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    await store.reschedule(
        Reschedule(
            lease=claimed.lease,
            run_at=at(30),
            refund_attempt=False,
            error="flaky",
            started_ago=timedelta(seconds=3),
            now=at(10),
        )
    )
    got = await get(store, claimed.id)
    assert got.status is JobStatus.SCHEDULED
    assert got.started_at == at(7)
