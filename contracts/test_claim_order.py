"""JobClaimer.claim ordering and eligibility: the same picks as taskq.domain.dispatch."""

from __future__ import annotations

import random
from typing import Any

import pytest

from taskq.domain.actor_config import ActorConfig, QueueMode
from taskq.domain.job import ClaimedJob
from taskq.domain.status import JobStatus
from taskq.testing.harness import EPOCH, Harness

from .helpers import (
    ACTORS,
    at,
    by_id,
    claim,
    enqueue,
    expected_claim,
    get,
    new_job,
    rotate,
    succeed,
)


async def test_strict_fifo_is_priority_then_scheduled_at_then_id(harness: Harness) -> None:
    """A strict-FIFO claim takes higher priority first, then earlier scheduled_at, then lower id."""
    store = harness.store
    j1 = await enqueue(store, new_job(priority=0), now=at(2))
    j2 = await enqueue(store, new_job(priority=0), now=at(1))
    j3 = await enqueue(store, new_job(priority=5), now=at(3))
    j4 = await enqueue(store, new_job(priority=0), now=at(1))
    j5 = await enqueue(store, new_job(priority=-1), now=at(0))
    expected = [j3, j2, j4, j1, j5]
    all_ids = [j1, j2, j3, j4, j5]
    assert (
        await expected_claim(
            store, all_ids, queues=["default"], actors=ACTORS, limit=10, now=at(10)
        )
        == expected
    )
    assert by_id(await claim(store, now=at(10))) == expected


async def test_limit_takes_the_head_of_the_order(harness: Harness) -> None:
    """A claim with limit n takes exactly the first n jobs of the dispatch order."""
    store = harness.store
    ids = [await enqueue(store, new_job(priority=i % 3), now=at(i)) for i in range(7)]
    first = by_id(await claim(store, limit=3, now=at(10)))
    assert first == [ids[2], ids[5], ids[1]]
    second = by_id(await claim(store, limit=3, now=at(10)))
    assert second == [ids[4], ids[0], ids[3]]
    assert by_id(await claim(store, limit=3, now=at(10))) == [ids[6]]
    assert await claim(store, limit=3, now=at(10)) == []


async def test_round_robin_interleaves_fairness_cohorts(harness: Harness) -> None:
    """Round robin takes one job per fairness cohort per round; keyless jobs form one cohort."""
    store = harness.store
    await store.set_queue_mode("rr", QueueMode.ROUND_ROBIN)
    a1 = await enqueue(store, new_job(queue="rr", fairness_key="A"), now=at(0))
    a2 = await enqueue(store, new_job(queue="rr", fairness_key="A"), now=at(1))
    a3 = await enqueue(store, new_job(queue="rr", fairness_key="A"), now=at(2))
    b1 = await enqueue(store, new_job(queue="rr", fairness_key="B"), now=at(3))
    b2 = await enqueue(store, new_job(queue="rr", fairness_key="B", priority=1), now=at(4))
    n1 = await enqueue(store, new_job(queue="rr"), now=at(5))
    # round 0: A→a1, B→b2 (priority), null→n1; cohorts in turn, in code-point order of
    # their keys (no claim yet: the rotation starts at the first).
    expected = [a1, b2, n1, a2, b1, a3]
    ids = [a1, a2, a3, b1, b2, n1]
    assert (
        await expected_claim(store, ids, queues=["rr"], actors=ACTORS, limit=10, now=at(9))
        == expected
    )
    assert by_id(await claim(store, queues=["rr"], now=at(9))) == expected


async def test_round_robin_without_fairness_keys_is_fifo(harness: Harness) -> None:
    """A round-robin queue on which no job sets a fairness key dispatches in FIFO order."""
    store = harness.store
    await store.set_queue_mode("rr", QueueMode.ROUND_ROBIN)
    ids = [await enqueue(store, new_job(queue="rr"), now=at(5 - i)) for i in range(5)]
    assert by_id(await claim(store, queues=["rr"], now=at(9))) == list(reversed(ids))


async def test_fairness_key_is_ignored_on_a_strict_fifo_queue(harness: Harness) -> None:
    """On a queue without a mode row, fairness keys do not change the FIFO order."""
    store = harness.store
    a1 = await enqueue(store, new_job(fairness_key="A"), now=at(0))
    a2 = await enqueue(store, new_job(fairness_key="A"), now=at(1))
    b1 = await enqueue(store, new_job(fairness_key="B"), now=at(2))
    assert by_id(await claim(store, now=at(9))) == [a1, a2, b1]


async def test_mode_change_applies_to_the_next_claim(harness: Harness) -> None:
    """Switching a queue to round robin changes the order of the very next claim."""
    store = harness.store
    a1 = await enqueue(store, new_job(fairness_key="A"), now=at(0))
    a2 = await enqueue(store, new_job(fairness_key="A"), now=at(1))
    a3 = await enqueue(store, new_job(fairness_key="A"), now=at(2))
    b1 = await enqueue(store, new_job(fairness_key="B"), now=at(3))
    assert by_id(await claim(store, limit=1, now=at(9))) == [a1]
    await store.set_queue_mode("default", QueueMode.ROUND_ROBIN)
    assert by_id(await claim(store, limit=2, now=at(9))) == [a2, b1]
    await store.set_queue_mode("default", QueueMode.STRICT_FIFO)
    assert by_id(await claim(store, limit=2, now=at(9))) == [a3]


async def test_mixed_queue_modes_follow_the_reference_model(harness: Harness) -> None:
    """A claim over a strict-FIFO and a round-robin queue at once matches select_for_dispatch."""
    store = harness.store
    await store.set_queue_mode("rr", QueueMode.ROUND_ROBIN)
    ids: list[int] = []
    for i, (queue, key, prio) in enumerate(
        [
            ("fifo", "A", 0),
            ("rr", "A", 0),
            ("rr", "A", 0),
            ("fifo", None, 1),
            ("rr", "B", 0),
            ("rr", None, 2),
            ("fifo", "B", 0),
            ("rr", "B", 0),
        ]
    ):
        job = new_job(queue=queue, fairness_key=key, priority=prio)
        ids.append(await enqueue(store, job, now=at(i % 3)))
    queues = ["fifo", "rr"]
    cursors: dict[str, str] = {}
    for _ in range(3):
        expected = await expected_claim(
            store, ids, queues=queues, actors=ACTORS, limit=3, now=at(9), cursors=cursors
        )
        got = await claim(store, queues=queues, limit=3, now=at(9))
        assert by_id(got) == expected
        cursors = await rotate(store, cursors, got)


async def test_claims_only_the_requested_queues(harness: Harness) -> None:
    """A claim never takes jobs from queues it did not ask for."""
    store = harness.store
    q1 = await enqueue(store, new_job(queue="q1"))
    q2 = await enqueue(store, new_job(queue="q2"))
    q3 = await enqueue(store, new_job(queue="q3"))
    assert by_id(await claim(store, queues=["q1", "q3"])) == [q1, q3]
    assert (await get(store, q2)).status is JobStatus.PENDING
    assert by_id(await claim(store, queues=["q2"])) == [q2]


async def test_claims_only_the_workers_actors(harness: Harness) -> None:
    """A claim never takes a job whose actor the worker did not register."""
    store = harness.store
    ja = await enqueue(store, new_job("a"))
    jb = await enqueue(store, new_job("b"))
    jx = await enqueue(store, new_job("unknown"))
    assert by_id(await claim(store, actors=["a"])) == [ja]
    assert by_id(await claim(store, actors=["b", "c"])) == [jb]
    assert (await get(store, jx)).status is JobStatus.PENDING


async def test_not_yet_due_jobs_are_not_claimed(harness: Harness) -> None:
    """Jobs whose scheduled_at is after the claim's now stay where they are."""
    store = harness.store
    later = await enqueue(store, new_job(scheduled_at=at(60)), now=at(0))
    pending_later = await enqueue(store, new_job(), now=at(30))
    due = await enqueue(store, new_job(), now=at(10))
    assert by_id(await claim(store, now=at(20))) == [due]
    assert (await get(store, later)).status is JobStatus.SCHEDULED
    assert (await get(store, pending_later)).status is JobStatus.PENDING
    assert by_id(await claim(store, now=at(30))) == [pending_later]


async def test_nothing_due_claims_nothing(harness: Harness) -> None:
    """A claim on an empty store returns an empty list."""
    assert await claim(harness.store, now=EPOCH) == []


@pytest.mark.parametrize("seed", range(1, 7))
async def test_claim_batches_match_the_reference_model(harness: Harness, seed: int) -> None:
    """Every claim on random queues, modes, cohorts and capacities equals the reference model."""
    rng = random.Random(seed)
    store = harness.store
    queues = ["q1", "q2", "q3"]
    await store.set_queue_mode("q2", QueueMode.ROUND_ROBIN)
    if rng.random() < 0.5:
        await store.set_queue_mode("q3", QueueMode.ROUND_ROBIN)
    await store.sync_actor_configs(
        [
            ActorConfig(actor="a", queue="q1", max_concurrent=rng.choice([2, 3])),
            ActorConfig(actor="b", queue="q2"),
        ]
    )
    ids: list[int] = []
    for _ in range(45):
        fields: dict[str, Any] = {
            "actor": rng.choice(ACTORS),
            "queue": rng.choice(queues),
            "priority": rng.choice([-1, 0, 0, 0, 2, 5]),
            "fairness_key": rng.choice([None, "", "t1", "t2", "t3", "t4", "t5"]),
        }
        if rng.random() < 0.2:
            ids.append(
                await enqueue(store, new_job(**fields, scheduled_at=at(rng.choice([20, 21]))))
            )
        else:
            ids.append(await enqueue(store, new_job(**fields), now=at(rng.choice([0, 1, 1, 2]))))
    running: list[ClaimedJob] = []
    cursors: dict[str, str] = {}
    now = at(10)
    for round_no in range(60):
        if round_no == 8:
            now = at(25)
            await store.promote_scheduled(now=now)
        worker_queues = rng.sample(queues, rng.randint(1, 3))
        worker_actors = rng.sample(ACTORS, rng.randint(1, 3))
        limit = rng.randint(1, 6)
        expected = await expected_claim(
            store,
            ids,
            queues=worker_queues,
            actors=worker_actors,
            limit=limit,
            now=now,
            cursors=cursors,
        )
        got = await claim(
            store,
            worker=f"w{round_no % 3}",
            queues=worker_queues,
            actors=worker_actors,
            limit=limit,
            now=now,
        )
        assert by_id(got) == expected, f"round {round_no}"
        cursors = await rotate(store, cursors, got)
        running.extend(got)
        # Finish some running jobs so capped actors get capacity back.
        rng.shuffle(running)
        finished = rng.randint(0, 2)
        for done in running[:finished]:
            await succeed(store, done.lease, now=now)
        del running[:finished]
    # Drain whatever is left with a worker that takes everything.
    while True:
        for done in running:
            await succeed(store, done.lease, now=now)
        expected = await expected_claim(
            store, ids, queues=queues, actors=ACTORS, limit=100, now=now, cursors=cursors
        )
        running = await claim(store, queues=queues, limit=100, now=now)
        assert by_id(running) == expected
        cursors = await rotate(store, cursors, running)
        if not running:
            break
    assert await store.count_active() == 0


@pytest.mark.parametrize("seed", range(1, 5))
async def test_fifo_claims_take_the_head_of_a_large_queue(harness: Harness, seed: int) -> None:
    """Uncapped actors on strict_fifo queues, many more jobs than a claim takes: each
    claim is the model's head (the case adapters answer with a FIFO shortcut). Jobs with
    and without fairness keys are interleaved: a key changes nothing on such a queue,
    wherever an adapter keeps the two kinds."""
    rng = random.Random(seed)
    store = harness.store
    ids = [
        await enqueue(
            store,
            new_job(
                actor=rng.choice(ACTORS),
                queue=rng.choice(["q1", "q2"]),
                priority=rng.choice([-3, 0, 0, 1, 7]),
                fairness_key=rng.choice([None, None, "", "k1", "k2", "__null__"]),
            ),
            now=at(rng.randint(0, 9)),
        )
        for _ in range(80)
    ]
    now = at(10)
    while True:
        queues = rng.sample(["q1", "q2"], rng.randint(1, 2))
        actors = rng.sample(ACTORS, rng.randint(1, len(ACTORS)))
        limit = rng.randint(1, 7)
        expected = await expected_claim(
            store, ids, queues=queues, actors=actors, limit=limit, now=now
        )
        got = await claim(store, queues=queues, actors=actors, limit=limit, now=now)
        assert by_id(got) == expected
        for job in got:
            await succeed(store, job.lease, now=now)
        if not got and not await expected_claim(
            store, ids, queues=["q1", "q2"], actors=ACTORS, limit=1, now=now
        ):
            break


async def _rr_cohorts(store: Any, sizes: list[tuple[str, int]]) -> dict[int, str]:
    """Enqueue each cohort's jobs on round_robin queue ``rr``, oldest cohort first."""
    await store.set_queue_mode("rr", QueueMode.ROUND_ROBIN)
    cohort_of: dict[int, str] = {}
    tick = 0
    for key, count in sizes:
        for _ in range(count):
            job_id = await enqueue(store, new_job(queue="rr", fairness_key=key), now=at(tick))
            cohort_of[job_id] = key
            tick += 1
    return cohort_of


@pytest.mark.parametrize("finish_between", [False, True], ids=["held", "finished"])
async def test_round_robin_one_job_claims_take_the_cohorts_in_turn(
    harness: Harness, finish_between: bool
) -> None:
    """One-job claims (a worker with one free slot) on cohorts A(4, oldest), B(4), C(4)
    take A, B, C, A, B, C, ...: the rotation outlives the claim, whether the claimed
    jobs are still running or already finished (before the rotation cursor: A×4, B×4,
    C×4, pure FIFO)."""
    store = harness.store
    cohort_of = await _rr_cohorts(store, [("A", 4), ("B", 4), ("C", 4)])
    order: list[str] = []
    cursors: dict[str, str] = {}
    for _ in range(12):
        expected = await expected_claim(
            store, cohort_of, queues=["rr"], actors=ACTORS, limit=1, now=at(20), cursors=cursors
        )
        got = await claim(store, queues=["rr"], limit=1, now=at(20))
        assert by_id(got) == expected
        cursors = await rotate(store, cursors, got)
        order.extend(cohort_of[job.id] for job in got)
        if finish_between:
            for job in got:
                await succeed(store, job.lease, now=at(20))
    assert "".join(order) == "ABCABCABCABC"
    assert await claim(store, queues=["rr"], limit=1, now=at(20)) == []


async def test_round_robin_rotation_follows_the_keys_not_their_age(harness: Harness) -> None:
    """Cohorts take turns in key order, however old their jobs are: with "c" oldest,
    one-job claims on a queue never claimed from take a, b, c, a, b, c (the rotation
    starts at the first key, then goes on after the last one served)."""
    store = harness.store
    cohort_of = await _rr_cohorts(store, [("c", 2), ("b", 2), ("a", 2)])
    order: list[str] = []
    for _ in range(6):
        got = await claim(store, queues=["rr"], limit=1, now=at(20))
        order.extend(cohort_of[job.id] for job in got)
    assert "".join(order) == "abcabc"


async def test_round_robin_claims_smaller_than_the_cohorts_share_them(
    harness: Harness,
) -> None:
    """Two-job claims over A(8, oldest), B(2), C(2) take A+B, C+A, B+C, then A's rest:
    C does not wait for B to drain, and A does not run in every claim (before the
    rotation cursor: A+B, A+B, A+C, A+C)."""
    store = harness.store
    cohort_of = await _rr_cohorts(store, [("A", 8), ("B", 2), ("C", 2)])
    claims: list[str] = []
    for _ in range(6):
        got = await claim(store, queues=["rr"], limit=2, now=at(20))
        claims.append("".join(cohort_of[job.id] for job in got))
        for job in got:
            await succeed(store, job.lease, now=at(20))
    assert claims == ["AB", "CA", "BC", "AA", "AA", "AA"]


async def test_round_robin_claim_as_large_as_the_cohorts_takes_one_of_each(
    harness: Harness,
) -> None:
    """A claim of at least as many jobs as there are cohorts with a due job takes one
    job from every such cohort before a second from any, however deep the oldest
    cohort's backlog."""
    store = harness.store
    cohort_of = await _rr_cohorts(store, [("A", 6), ("B", 2), ("C", 2)])
    claims: list[str] = []
    for _ in range(4):
        got = await claim(store, queues=["rr"], limit=3, now=at(20))
        claims.append("".join(cohort_of[job.id] for job in got))
        for job in got:
            await succeed(store, job.lease, now=at(20))
    assert claims == ["ABC", "ABC", "AAA", "A"]
