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
any_residual = st.dictionaries(st.sampled_from((*ACTORS, "ghost")), st.none() | st.integers(-1, 4))
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


def _within_capacity(
    cs: list[DispatchCandidate], residual: Mapping[str, int | None]
) -> list[DispatchCandidate]:
    """Candidates among their actor's first ``residual`` jobs in FIFO order (stage 1)."""
    out = []
    for c in cs:
        cap = residual.get(c.actor)
        ahead = sum(1 for o in cs if o.actor == c.actor and fifo_key(o) < fifo_key(c))
        if cap is None or ahead < cap:
            out.append(c)
    return out


@given(candidate_lists(), any_modes, any_residual, limits)
def test_claim_is_a_prefix_of_the_eligible_dispatch_order(
    cs: list[DispatchCandidate],
    modes: dict[str, QueueMode],
    residual: dict[str, int | None],
    limit: int,
) -> None:
    """A job is skipped only if earlier FIFO jobs used its actor's residual or the batch is full."""
    got = select_for_dispatch(cs, modes=modes, residual=residual, limit=limit)
    allowed = _within_capacity(cs, residual)
    order = dispatch_order(allowed, modes)
    assert got == order[: len(got)]
    if len(got) < limit:
        assert got == order


@given(candidate_lists(), any_modes, any_residual, limits)
def test_jobs_beyond_capacity_block_nothing(
    cs: list[DispatchCandidate],
    modes: dict[str, QueueMode],
    residual: dict[str, int | None],
    limit: int,
) -> None:
    """Removing the jobs an actor has no capacity for leaves the claim unchanged."""
    got = select_for_dispatch(cs, modes=modes, residual=residual, limit=limit)
    allowed = _within_capacity(cs, residual)
    assert select_for_dispatch(allowed, modes=modes, residual=residual, limit=limit) == got
    assert select_for_dispatch(allowed, modes=modes, residual={}, limit=limit) == got


@given(candidate_lists(), any_modes, any_residual, st.integers(0, 30))
def test_a_bigger_limit_only_appends(
    cs: list[DispatchCandidate],
    modes: dict[str, QueueMode],
    residual: dict[str, int | None],
    limit: int,
) -> None:
    """The claim with limit n is a prefix of the claim with limit n + 1 (greedy, stable)."""
    small = select_for_dispatch(cs, modes=modes, residual=residual, limit=limit)
    big = select_for_dispatch(cs, modes=modes, residual=residual, limit=limit + 1)
    assert big[: len(small)] == small
    assert len(big) - len(small) in (0, 1)


@given(st.permutations(list(range(6))), candidate_lists(max_size=6), any_modes, any_residual)
def test_claim_does_not_depend_on_input_order(
    perm: list[int],
    cs: list[DispatchCandidate],
    modes: dict[str, QueueMode],
    residual: dict[str, int | None],
) -> None:
    """Candidates given in any order yield the same claim."""
    shuffled = [cs[i] for i in perm if i < len(cs)]
    assert select_for_dispatch(shuffled, modes=modes, residual=residual, limit=4) == (
        select_for_dispatch(cs, modes=modes, residual=residual, limit=4)
    )


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
    """Along the dispatch order a job's rank in its cohort never decreases (one job per
    round), and within a round (no cursor yet) the cohorts come in key order, the
    strict_fifo one first."""
    order = dispatch_order(cs, modes)
    assert sorted(order, key=lambda c: c.id) == sorted(cs, key=lambda c: c.id)
    seen: Counter[tuple[str, str]] = Counter()
    rounds: list[tuple[int, str]] = []
    for c in order:
        cohort = cohort_of(c, modes)
        rounds.append((seen[cohort], cohort[1]))
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
