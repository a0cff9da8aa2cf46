"""Dispatch reference model: which due jobs a claim takes, in which order.

Every adapter's claim must agree with :func:`select_for_dispatch`. The model
is static (two stages, no step-by-step simulation) so that SQL can compute it
exactly with window functions over a bounded candidate set.

Stage 1, capacity. An actor with ``max_concurrent`` may have at most that
many running jobs; its *residual* is ``max_concurrent - running`` (``None``
= unlimited). Of a capped actor's due jobs, only its first ``residual`` in
FIFO order ``(priority desc, scheduled_at, id)`` are *eligible*; the rest wait
for a later claim. Excluded jobs never block other actors' jobs.

Stage 2, order. Eligible jobs fall into *cohorts*: all jobs on
``strict_fifo`` queues form one cohort; on ``round_robin`` queues each
``fairness_key`` is a cohort (jobs without a key share the ``__null__``
cohort). A job's *round* is its rank within its cohort in FIFO order. The
dispatch order is ``(round, priority desc, scheduled_at, id)``: one job from
each cohort per round. A claim takes the first ``limit`` of that order.

Rounds are computed afresh by each claim, over pending jobs only: nothing
remembers which cohort the previous claim served. A claim of fewer jobs than
there are cohorts takes the oldest cohorts' heads, and the next one finds the
oldest cohort's next job at round 0 again, so one-job claims serve cohorts in
FIFO order (contracts/test_claim_order.py pins it; docs/decisions.md says why).

With only strict_fifo queues (the default) the order is exactly
``priority desc, scheduled_at, id``; a round_robin queue on which no job has
a fairness key degenerates to the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from taskq.domain.actor_config import QueueMode
from taskq.domain.job import NULL_COHORT


@dataclass(frozen=True, slots=True)
class DispatchCandidate:
    """The fields of a due pending job that dispatch looks at."""

    id: int
    queue: str
    actor: str
    priority: int
    scheduled_at: datetime
    fairness_key: str | None = None


def cohort_of(candidate: DispatchCandidate, modes: Mapping[str, QueueMode]) -> tuple[str, str]:
    """The cohort a candidate competes in (see module docstring)."""
    if modes.get(candidate.queue, QueueMode.STRICT_FIFO) is QueueMode.ROUND_ROBIN:
        return ("round_robin", candidate.fairness_key or NULL_COHORT)
    return ("strict_fifo", "")


def _fifo_key(c: DispatchCandidate) -> tuple[int, datetime, int]:
    return (-c.priority, c.scheduled_at, c.id)


def dispatch_order(
    candidates: Iterable[DispatchCandidate], modes: Mapping[str, QueueMode]
) -> list[DispatchCandidate]:
    """Stage 2: candidates ordered by (round in cohort, priority desc, scheduled_at, id)."""
    cohorts: dict[tuple[str, str], list[DispatchCandidate]] = {}
    for c in candidates:
        cohorts.setdefault(cohort_of(c, modes), []).append(c)
    ranked: list[tuple[int, DispatchCandidate]] = []
    for members in cohorts.values():
        members.sort(key=_fifo_key)
        ranked.extend(enumerate(members))
    ranked.sort(key=lambda rc: (rc[0], *_fifo_key(rc[1])))
    return [c for _, c in ranked]


def eligible(
    candidates: Iterable[DispatchCandidate], residual: Mapping[str, int | None]
) -> list[DispatchCandidate]:
    """Stage 1: drop each capped actor's jobs beyond its residual, in FIFO order.

    ``residual`` maps actor → remaining capacity; a missing actor or ``None``
    means unlimited; zero or less means none.
    """
    used: dict[str, int] = {}
    out: list[DispatchCandidate] = []
    for c in sorted(candidates, key=_fifo_key):
        cap = residual.get(c.actor)
        if cap is not None:
            if used.get(c.actor, 0) >= cap:
                continue
            used[c.actor] = used.get(c.actor, 0) + 1
        out.append(c)
    return out


def select_for_dispatch(
    candidates: Iterable[DispatchCandidate],
    *,
    modes: Mapping[str, QueueMode],
    residual: Mapping[str, int | None],
    limit: int,
) -> list[DispatchCandidate]:
    """The jobs one claim of at most ``limit`` takes, in dispatch order."""
    if limit <= 0:
        return []
    return dispatch_order(eligible(candidates, residual), modes)[:limit]


def residual_capacity(
    max_concurrent: Mapping[str, int | None], running: Mapping[str, int]
) -> dict[str, int | None]:
    """Residual per actor from stored ``max_concurrent`` and running counts."""
    out: dict[str, int | None] = {}
    for actor, cap in max_concurrent.items():
        out[actor] = None if cap is None else max(cap - running.get(actor, 0), 0)
    return out


__all__: Sequence[str] = [
    "DispatchCandidate",
    "cohort_of",
    "dispatch_order",
    "eligible",
    "residual_capacity",
    "select_for_dispatch",
]
