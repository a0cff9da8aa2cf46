"""JobFinisher.finish / finish_many: terminal writes, results, result TTLs, attempt records."""

from __future__ import annotations

from datetime import timedelta

import pytest

from taskq.domain.actor_config import ActorConfig
from taskq.domain.errors import IllegalTransition
from taskq.domain.status import TERMINAL, JobStatus
from taskq.ports.store_params import CapacityUpdate, Finish
from taskq.testing.harness import Harness

from .helpers import at, enqueue_and_claim, get, new_job


async def test_success_writes_result_finished_at_and_attempt(harness: Harness) -> None:
    """A succeeded finish stores the result and finished_at and records the attempt."""
    store = harness.store
    claimed = await enqueue_and_claim(store, started=False)
    await store.mark_started([claimed.lease], now=at(1))
    await store.finish(
        Finish(lease=claimed.lease, status=JobStatus.SUCCEEDED, result={"ok": [1, 2]}, now=at(7))
    )
    got = await get(store, claimed.id)
    assert got.status is JobStatus.SUCCEEDED
    assert got.result == {"ok": [1, 2]}
    assert got.finished_at == at(7)
    assert got.started_at == at(1)
    assert got.result_expires_at is None
    assert got.last_error is None
    assert got.attempt == 1
    [record] = await store.attempts(claimed.id)
    assert (record.job_id, record.attempt, record.worker_id) == (claimed.id, 1, "w1")
    assert (record.error_class, record.error) == (None, None)
    assert record.finished_at == at(7)


@pytest.mark.parametrize("status", sorted(TERMINAL), ids=str)
async def test_every_terminal_status_can_be_written(harness: Harness, status: JobStatus) -> None:
    """The owner can end a running job in each terminal status, with finished_at = now."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    error = None if status is JobStatus.SUCCEEDED else ("Why", "why")
    await store.finish(
        Finish(
            lease=claimed.lease,
            status=status,
            error=error and error[1],
            error_class=error and error[0],
            now=at(3),
        )
    )
    got = await get(store, claimed.id)
    assert got.status is status
    assert got.finished_at == at(3)
    assert await store.count_active() == 0
    [record] = await store.attempts(claimed.id)
    assert (record.error_class, record.error) == (error or (None, None))
    assert record.finished_at == at(3)


async def test_failure_records_the_error(harness: Harness) -> None:
    """A failed finish stores the error as last_error and in the attempt record."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.finish(
        Finish(
            lease=claimed.lease,
            status=JobStatus.FAILED,
            error="division by zero",
            error_class="ZeroDivisionError",
            now=at(2),
        )
    )
    got = await get(store, claimed.id)
    assert got.status is JobStatus.FAILED
    assert got.last_error == "division by zero"
    [record] = await store.attempts(claimed.id)
    assert (record.error_class, record.error) == ("ZeroDivisionError", "division by zero")


@pytest.mark.parametrize("status", [JobStatus.RUNNING, JobStatus.PENDING], ids=str)
async def test_non_terminal_finish_is_refused(harness: Harness, status: JobStatus) -> None:
    """finish with a status that is not terminal raises IllegalTransition and changes nothing."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    before = await get(store, claimed.id)
    with pytest.raises(IllegalTransition):
        await store.finish(Finish(lease=claimed.lease, status=status, now=at(2)))
    assert await get(store, claimed.id) == before
    assert await store.attempts(claimed.id) == []


async def test_result_ttl_literal_sets_result_expiry(harness: Harness) -> None:
    """A result_ttl literal makes the result expire that long after the finish."""
    store = harness.store
    claimed = await enqueue_and_claim(store)
    await store.finish(
        Finish(
            lease=claimed.lease,
            status=JobStatus.SUCCEEDED,
            result="r",
            result_ttl=timedelta(hours=1),
            now=at(10),
        )
    )
    assert (await get(store, claimed.id)).result_expires_at == at(10 + 3600)


async def test_stored_result_ttl_wins_over_the_literal(harness: Harness) -> None:
    """A stored actor_config.result_ttl, not the worker's literal, sets the result expiry."""
    store = harness.store
    await store.sync_actor_configs(
        [ActorConfig(actor="a", queue="default", result_ttl=timedelta(seconds=30))]
    )
    claimed = await enqueue_and_claim(store)
    await store.finish(
        Finish(
            lease=claimed.lease,
            status=JobStatus.SUCCEEDED,
            result="r",
            result_ttl=timedelta(hours=1),
            now=at(10),
        )
    )
    assert (await get(store, claimed.id)).result_expires_at == at(40)


async def test_stored_result_ttl_is_reread_at_every_finish(harness: Harness) -> None:
    """Changing or clearing the stored result_ttl applies to the next finish."""
    store = harness.store
    await store.sync_actor_configs(
        [ActorConfig(actor="a", queue="default", result_ttl=timedelta(seconds=30))]
    )
    await store.set_actor_capacity(CapacityUpdate(actor="a", result_ttl=timedelta(seconds=5)))
    first = await enqueue_and_claim(store)
    await store.finish(
        Finish(lease=first.lease, status=JobStatus.SUCCEEDED, result_ttl=None, now=at(10))
    )
    assert (await get(store, first.id)).result_expires_at == at(15)

    await store.set_actor_capacity(CapacityUpdate(actor="a", clear=frozenset({"result_ttl"})))
    second = await enqueue_and_claim(store, now=at(20))
    await store.finish(
        Finish(
            lease=second.lease,
            status=JobStatus.SUCCEEDED,
            result_ttl=timedelta(seconds=100),
            now=at(20),
        )
    )
    assert (await get(store, second.id)).result_expires_at == at(120)


async def test_finish_many_finishes_every_owned_job(harness: Harness) -> None:
    """finish_many with only owned leases returns no lost lease and writes each outcome."""
    store = harness.store
    one = await enqueue_and_claim(store, new_job(payload={"i": 1}))
    two = await enqueue_and_claim(store, new_job(payload={"i": 2}))
    three = await enqueue_and_claim(store, new_job(payload={"i": 3}))
    lost = await store.finish_many(
        [
            Finish(lease=one.lease, status=JobStatus.SUCCEEDED, result="one", now=at(5)),
            Finish(
                lease=two.lease,
                status=JobStatus.SUCCEEDED,
                result="two",
                result_ttl=timedelta(seconds=10),
                now=at(6),
            ),
            Finish(lease=three.lease, status=JobStatus.CANCELLED, now=at(7)),
        ]
    )
    assert lost == []
    got = [await get(store, c.id) for c in (one, two, three)]
    assert [j.status for j in got] == [
        JobStatus.SUCCEEDED,
        JobStatus.SUCCEEDED,
        JobStatus.CANCELLED,
    ]
    assert [j.result for j in got] == ["one", "two", None]
    assert [j.finished_at for j in got] == [at(5), at(6), at(7)]
    assert got[1].result_expires_at == at(16)
    for c in (one, two, three):
        assert len(await store.attempts(c.id)) == 1


async def test_finish_many_of_nothing_is_a_no_op(harness: Harness) -> None:
    """finish_many of an empty list returns an empty list."""
    assert await harness.store.finish_many([]) == []


async def test_finish_many_refuses_a_result_json_cannot_hold_and_writes_none(
    harness: Harness,
) -> None:
    """One result JSON cannot hold (NaN) refuses the whole batch with ValueError or
    TypeError before anything is written: every job of it is still running, its lease held."""
    store = harness.store
    claimed = [await enqueue_and_claim(store, new_job(payload={"i": i})) for i in range(3)]
    results: list[object] = ["fine", {"v": float("nan")}, None]
    with pytest.raises((ValueError, TypeError)):
        await store.finish_many(
            [
                Finish(lease=c.lease, status=JobStatus.SUCCEEDED, result=r, now=at(5))
                for c, r in zip(claimed, results, strict=True)
            ]
        )
    for c in claimed:
        got = await get(store, c.id)
        assert (got.status, got.result, got.fencing_token) == (
            JobStatus.RUNNING,
            None,
            c.fencing_token,
        )
        assert await store.attempts(c.id) == []
    # Written again without the bad result, the batch lands whole.
    assert (
        await store.finish_many(
            [Finish(lease=c.lease, status=JobStatus.SUCCEEDED, now=at(6)) for c in claimed]
        )
        == []
    )


#: Error texts no store can keep as they are, and how they are stored: an exception
#: message may carry a NUL (from a malformed payload, say) or lone surrogates (bytes
#: decoded with ``surrogateescape``); the write lands all the same, each written visibly.
ESCAPED_ERRORS = {
    "nul": (("bad byte \x00 here", "Odd\x00Error"), ("bad byte \\x00 here", "Odd\\x00Error")),
    "lone surrogate": (
        ("bad name b'\\xff' -> \udcff", "Odd\ud800Error"),
        ("bad name b'\\xff' -> \\udcff", "Odd\\ud800Error"),
    ),
}


@pytest.mark.parametrize(("given", "stored"), ESCAPED_ERRORS.values(), ids=ESCAPED_ERRORS.keys())
async def test_an_error_text_no_store_can_keep_is_stored_escaped(
    harness: Harness, given: tuple[str, str], stored: tuple[str, str]
) -> None:
    store = harness.store
    claimed = await enqueue_and_claim(store)
    error, error_class = given
    await store.finish(
        Finish(
            lease=claimed.lease,
            status=JobStatus.FAILED,
            error=error,
            error_class=error_class,
            now=at(2),
        )
    )
    got = await get(store, claimed.id)
    assert (got.status, got.last_error) == (JobStatus.FAILED, stored[0])
    [record] = await store.attempts(claimed.id)
    assert (record.error, record.error_class) == stored


async def test_finish_many_keeps_each_writes_own_fields(harness: Harness) -> None:
    """In one batch, fields only some writes set (an error, a result, started_ago, a
    TTL) land on those jobs alone: the others keep their columns empty."""
    store = harness.store
    ok, bad, gone = [
        await enqueue_and_claim(store, new_job(payload={"i": i}), started=False) for i in range(3)
    ]
    lost = await store.finish_many(
        [
            Finish(lease=ok.lease, status=JobStatus.SUCCEEDED, now=at(10)),
            Finish(
                lease=bad.lease,
                status=JobStatus.FAILED,
                error="boom",
                error_class="ValueError",
                started_ago=timedelta(seconds=3),
                now=at(10),
            ),
            Finish(
                lease=gone.lease,
                status=JobStatus.SUCCEEDED,
                result=[1, 2],
                result_ttl=timedelta(seconds=5),
                now=at(10),
            ),
        ]
    )
    assert lost == []
    done, failed, kept = [await get(store, c.id) for c in (ok, bad, gone)]
    assert (done.status, done.result, done.last_error, done.result_expires_at) == (
        JobStatus.SUCCEEDED,
        None,
        None,
        None,
    )
    assert (failed.status, failed.last_error, failed.result) == (JobStatus.FAILED, "boom", None)
    assert failed.started_at == at(7)
    assert (kept.result, kept.last_error, kept.result_expires_at) == ([1, 2], None, at(15))
    assert [(a.outcome, a.error_class) for a in await store.attempts(bad.id)] == [
        ("failed", "ValueError")
    ]
    assert [(a.outcome, a.error_class) for a in await store.attempts(ok.id)] == [
        ("succeeded", None)
    ]


async def test_finish_many_refuses_a_result_expiry_past_what_a_store_keeps_and_writes_none(
    harness: Harness,
) -> None:
    """A result_ttl whose expiry no store can hold (timedelta.max) refuses the whole batch
    with ValueError before anything is written, as a result JSON cannot hold does: every
    job of it is still running, its lease held."""
    store = harness.store
    claimed = [await enqueue_and_claim(store, new_job(payload={"i": i})) for i in range(3)]
    ttls = [None, timedelta.max, None]
    with pytest.raises(ValueError, match=r"out of range|past the latest time"):
        await store.finish_many(
            [
                Finish(lease=c.lease, status=JobStatus.SUCCEEDED, result_ttl=t, now=at(5))
                for c, t in zip(claimed, ttls, strict=True)
            ]
        )
    for c in claimed:
        got = await get(store, c.id)
        assert (got.status, got.result_expires_at, got.fencing_token) == (
            JobStatus.RUNNING,
            None,
            c.fencing_token,
        )
        assert await store.attempts(c.id) == []
