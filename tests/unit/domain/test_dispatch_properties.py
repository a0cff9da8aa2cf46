"""Property tests: select_for_dispatch against the rules stated in dispatch.py."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from taskq.domain.actor_config import QueueMode
from taskq.domain.dispatch import (
    DispatchCandidate,
    cohort_of,
    dispatch_order,
    select_for_dispatch,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
QUEUES = ("q1", "q2", "q3")
ACTORS = ("a1", "a2", "a3")
KEYS = (None, "k1", "k2", "k3")


def fifo_key(c: DispatchCandidate) -> tuple[int, datetime, int]:
    return (-c.priority, c.scheduled_at, c.id)


@st.composite
def candidate_lists(draw: st.DrawFn, max_size: int = 25) -> list[DispatchCandidate]:
    # Small value ranges so that priority and time ties are common.
    job_ids = draw(st.lists(st.integers(1, 10_000), unique=True, max_size=max_size))
    return [
        DispatchCandidate(
            id=i,
            queue=draw(st.sampled_from(QUEUES)),
            actor=draw(st.sampled_from(ACTORS)),
            priority=draw(st.integers(-2, 2)),
            scheduled_at=T0 + timedelta(seconds=draw(st.integers(0, 4))),
            fairness_key=draw(st.sampled_from(KEYS)),
        )
        for i in job_ids
    ]


any_modes = st.dictionaries(st.sampled_from(QUEUES), st.sampled_from(list(QueueMode)))
any_residual = st.dictionaries(
    st.sampled_from((*ACTORS, "ghost")), st.none() | st.integers(-1, 4)
)
unlimited = st.dictionaries(st.sampled_from(ACTORS), st.none())
limits = st.integers(-1, 30)


def taken_counts(taken: list[DispatchCandidate]) -> Counter[str]:
    return Counter(c.actor for c in taken)


@given(
    candidate_lists(),
    st.dictionaries(st.sampled_from(QUEUES), st.just(QueueMode.STRICT_FIFO)),
    unlimited,
    limits,
)
def test_strict_fifo_without_limits_is_sorted_prefix(
    cs: list[DispatchCandidate],
    modes: dict[str, QueueMode],
    residual: dict[str, int | None],
    limit: int,
) -> None:
    """With only strict_fifo queues and no capacity limits the claim is the sorted prefix."""
    got = select_for_dispatch(cs, modes=modes, residual=residual, limit=limit)
    assert got == sorted(cs, key=fifo_key)[: max(limit, 0)]


@given(candidate_lists(), any_modes, any_residual, limits)
def test_never_exceeds_limit_or_residual(
    cs: list[DispatchCandidate],
    modes: dict[str, QueueMode],
    residual: dict[str, int | None],
    limit: int,
) -> None:
    """The claim never exceeds limit nor any actor's residual."""
    got = select_for_dispatch(cs, modes=modes, residual=residual, limit=limit)
    assert len(got) <= max(limit, 0)
    assert len({c.id for c in got}) == len(got)
    for actor, n in taken_counts(got).items():
        cap = residual.get(actor)
        if cap is not None:
            assert n <= max(cap, 0)


def _exhausted(actor: str, taken_before: Counter[str], residual: Mapping[str, int | None]) -> bool:
    cap = residual.get(actor)
    return cap is not None and taken_before[actor] >= cap


@given(candidate_lists(), any_modes, any_residual, limits)
def test_claim_is_the_greedy_walk_of_dispatch_order(
    cs: list[DispatchCandidate],
    modes: dict[str, QueueMode],
    residual: dict[str, int | None],
    limit: int,
) -> None:
    """Taken jobs keep dispatch order; a job is skipped only when its actor had no residual left."""
    order = dispatch_order(cs, modes)
    got = select_for_dispatch(cs, modes=modes, residual=residual, limit=limit)
    position = {c.id: i for i, c in enumerate(order)}
    taken_positions = [position[c.id] for c in got]
    assert taken_positions == sorted(taken_positions)

    taken_ids = {c.id for c in got}
    last = taken_positions[-1] if taken_positions else -1
    before: Counter[str] = Counter()
    for i, c in enumerate(order):
        if c.id in taken_ids:
            before[c.actor] += 1
        elif i < last or len(got) < limit:
            # Before the last taken job, or anywhere if the batch is not full:
            # the only excuse for skipping is an exhausted actor.
            assert _exhausted(c.actor, before, residual), c


@given(candidate_lists(), any_modes, unlimited, limits)
def test_each_cohort_gives_its_best_ranked_jobs(
    cs: list[DispatchCandidate],
    modes: dict[str, QueueMode],
    residual: dict[str, int | None],
    limit: int,
) -> None:
    """Without capacity limits, the jobs taken from a cohort are that cohort's best-ranked ones."""
    got = select_for_dispatch(cs, modes=modes, residual=residual, limit=limit)
    members: dict[tuple[str, str], list[DispatchCandidate]] = defaultdict(list)
    for c in cs:
        members[cohort_of(c, modes)].append(c)
    taken: dict[tuple[str, str], list[DispatchCandidate]] = defaultdict(list)
    for c in got:
        taken[cohort_of(c, modes)].append(c)
    for cohort, picked in taken.items():
        assert picked == sorted(members[cohort], key=fifo_key)[: len(picked)]


@given(candidate_lists(), any_modes)
def test_dispatch_order_rounds_never_go_back(
    cs: list[DispatchCandidate], modes: dict[str, QueueMode]
) -> None:
    """Along the dispatch order a job's rank in its cohort never decreases (one job per round)."""
    order = dispatch_order(cs, modes)
    assert sorted(order, key=lambda c: c.id) == sorted(cs, key=lambda c: c.id)
    seen: Counter[tuple[str, str]] = Counter()
    rounds: list[tuple[int, tuple[int, datetime, int]]] = []
    for c in order:
        cohort = cohort_of(c, modes)
        rounds.append((seen[cohort], fifo_key(c)))
        seen[cohort] += 1
    assert rounds == sorted(rounds)


@st.composite
def balanced_round_robin(draw: st.DrawFn) -> tuple[list[DispatchCandidate], int, int]:
    """Round-robin candidates in k cohorts, each with at least ceil(limit / k) jobs."""
    k = draw(st.integers(1, 4))
    limit = draw(st.integers(1, 16))
    need = -(-limit // k)
    cs: list[DispatchCandidate] = []
    next_id = 1
    for cohort in range(k):
        for _ in range(draw(st.integers(need, need + 3))):
            cs.append(
                DispatchCandidate(
                    id=next_id,
                    queue=draw(st.sampled_from(("r1", "r2"))),
                    actor=draw(st.sampled_from(ACTORS)),
                    priority=draw(st.integers(-2, 2)),
                    scheduled_at=T0 + timedelta(seconds=draw(st.integers(0, 4))),
                    fairness_key=None if cohort == 0 else f"tenant{cohort}",
                )
            )
            next_id += 1
    return cs, k, limit


@given(balanced_round_robin())
def test_round_robin_takes_an_even_share_per_cohort(
    case: tuple[list[DispatchCandidate], int, int],
) -> None:
    """When every cohort has enough jobs, per-cohort counts in a claim differ by at most one."""
    cs, k, limit = case
    modes = {"r1": QueueMode.ROUND_ROBIN, "r2": QueueMode.ROUND_ROBIN}
    got = select_for_dispatch(cs, modes=modes, residual={}, limit=limit)
    assert len(got) == limit
    per_cohort = Counter(cohort_of(c, modes) for c in got)
    counts = [per_cohort[cohort] for cohort in {cohort_of(c, modes) for c in cs}]
    assert len(counts) == k
    assert max(counts) - min(counts) <= 1
