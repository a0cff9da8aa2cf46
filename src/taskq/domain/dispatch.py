"""Dispatch reference model: which due jobs a claim takes, in which order.

Every adapter's claim must agree with :func:`select_for_dispatch`.

Ordering. Candidates fall into *cohorts*: all jobs on ``strict_fifo`` queues
form one cohort; on ``round_robin`` queues each ``fairness_key`` is a cohort
(jobs without a key share the ``__null__`` cohort). Within a cohort jobs are
ranked by ``(priority desc, scheduled_at, id)``; a job's *round* is its rank
in its cohort. The dispatch order is ``(round, priority desc, scheduled_at,
id)``: one job from each cohort per round. With only strict_fifo queues (the
default) this is exactly ``priority desc, scheduled_at, id``; a round_robin
queue with no fairness keys degenerates to the same order.

Capacity. An actor with ``max_concurrent`` may have at most that many running
jobs; its *residual* is ``max_concurrent - running`` (``None`` = unlimited).
Walking the order, a job is taken while its actor has residual left and the
batch is below ``limit``; skipped jobs do not block later ones.
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
    """All candidates in dispatch order, before capacity limits."""
    cohorts: dict[tuple[str, str], list[DispatchCandidate]] = {}
    for c in candidates:
        cohorts.setdefault(cohort_of(c, modes), []).append(c)
    ranked: list[tuple[int, DispatchCandidate]] = []
    for members in cohorts.values():
        members.sort(key=_fifo_key)
        ranked.extend(enumerate(members))
    ranked.sort(key=lambda rc: (rc[0], *_fifo_key(rc[1])))
    return [c for _, c in ranked]


def select_for_dispatch(
    candidates: Iterable[DispatchCandidate],
    *,
    modes: Mapping[str, QueueMode],
    residual: Mapping[str, int | None],
    limit: int,
) -> list[DispatchCandidate]:
    """The jobs one claim of at most ``limit`` takes, in dispatch order.

    ``residual`` maps actor → remaining capacity; a missing actor or ``None``
    means unlimited; zero or less means none.
    """
    if limit <= 0:
        return []
    left: dict[str, int | None] = dict(residual)
    taken: list[DispatchCandidate] = []
    for c in dispatch_order(candidates, modes):
        cap = left.get(c.actor)
        if cap is not None:
            if cap <= 0:
                continue
            left[c.actor] = cap - 1
        taken.append(c)
        if len(taken) >= limit:
            break
    return taken


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
    "residual_capacity",
    "select_for_dispatch",
]
