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
cohort). A job's *round* is its rank within its cohort in FIFO order. Within a
round, round-robin cohorts take turns in a rotation that outlives the claim:
each round_robin queue keeps a *cursor*, the cohort its last claim took last,
and the cohorts after it (in code-point order of their keys) come first, then
the rest from the start; the strict_fifo cohort, which has no key, leads every
round. The dispatch order is ``(round, wrapped, cohort, priority desc,
scheduled_at, id)`` where ``wrapped`` says the cohort is not after its job's
queue's cursor. A claim takes the first ``limit`` of that order and moves each
round_robin queue's cursor to the cohort of the last job it took there
(:func:`advance_cursors`). So claims of any size take cohorts in turn: one-job
claims over cohorts A, B and C take A, B, C, A, B, C, ...

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
    candidates: Iterable[DispatchCandidate],
    modes: Mapping[str, QueueMode],
    cursors: Mapping[str, str] | None = None,
) -> list[DispatchCandidate]:
    """Stage 2: candidates ordered by (round, wrapped, cohort, priority desc, scheduled_at, id).

    ``cursors`` maps a round_robin queue to the cohort its last claim took last
    (a queue without one starts the rotation from the first cohort).
    """
    cursors = cursors or {}
    cohorts: dict[tuple[str, str], list[DispatchCandidate]] = {}
    for c in candidates:
        cohorts.setdefault(cohort_of(c, modes), []).append(c)
    ranked: list[tuple[tuple[int, int, str], DispatchCandidate]] = []
    for (kind, key), members in cohorts.items():
        members.sort(key=_fifo_key)
        for rank, c in enumerate(members):
            cursor = cursors.get(c.queue) if kind == "round_robin" else None
            wrapped = int(cursor is not None and key <= cursor)
            ranked.append(((rank, wrapped, key), c))
    ranked.sort(key=lambda rc: (*rc[0], *_fifo_key(rc[1])))
    return [c for _, c in ranked]


def advance_cursors(
    cursors: Mapping[str, str],
    taken: Iterable[tuple[str, str | None]],
    modes: Mapping[str, QueueMode],
) -> dict[str, str]:
    """The cursors after a claim took ``taken`` ((queue, fairness_key), in dispatch order)."""
    out = dict(cursors)
    for queue, key in taken:
        if modes.get(queue, QueueMode.STRICT_FIFO) is QueueMode.ROUND_ROBIN:
            out[queue] = key or NULL_COHORT
    return out


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
    cursors: Mapping[str, str] | None = None,
) -> list[DispatchCandidate]:
    """The jobs one claim of at most ``limit`` takes, in dispatch order."""
    if limit <= 0:
        return []
    return dispatch_order(eligible(candidates, residual), modes, cursors)[:limit]


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
    "advance_cursors",
    "cohort_of",
    "dispatch_order",
    "eligible",
    "residual_capacity",
    "select_for_dispatch",
]
