"""Stranded jobs: waiting jobs no live worker can claim, as the leader and until-idle report them.

A job is claimable by a live worker (one seen within ``lock_lease``) that
registers its actor and consumes its queue; ``JobReader.stranded_actors``
reads the others, per (actor, queue), with the reason (see
``StrandedReason``). The leader warns about them (``stranded-actors``);
``--until-idle`` stops with exit 5 when they are all that is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any, Final

from taskq.app.settings import WorkerSettings
from taskq.ports.store_params import StrandedJobs, StrandedReason

#: What each reason means, in the words the log and the one-line exit reason use.
REASONS: Final[dict[StrandedReason, str]] = {
    StrandedReason.UNREGISTERED: "no worker ever registered this actor: no actor_config row",
    StrandedReason.NO_LIVE_WORKER: "no live worker registers this actor",
    StrandedReason.QUEUE_NOT_CONSUMED: (
        "no live worker that registers this actor consumes this queue"
    ),
}

NOTE: Final = (
    "waiting jobs that no live worker can claim (a worker claims a job when it registers the "
    "actor and consumes the queue); they wait, nothing is deleted, until such a worker runs. "
    "reason: unregistered = no worker ever registered the actor (no actor_config row: a typo "
    "or a removed actor); no_live_worker = registered once, but no worker seen within "
    "TASKQ_LOCK_LEASE registers it now (retired, or its workers are down); "
    "queue_not_consumed = live workers register the actor but none consumes the queue "
    "(add the queue to TASKQ_QUEUES / --queues)"
)


def live_within(settings: WorkerSettings) -> timedelta:
    """How recently a worker must have been seen to count as able to claim: one lease
    (a worker silent that long has lost its leases)."""
    return timedelta(seconds=settings.lock_lease)


def as_fields(stranded: Iterable[StrandedJobs]) -> list[dict[str, Any]]:
    """The entries as log fields (JSON-able)."""
    return [
        {"actor": s.actor, "queue": s.queue, "waiting": s.waiting, "reason": s.reason.value}
        for s in stranded
    ]


def summary(stranded: Sequence[StrandedJobs]) -> str:
    """One line naming every (actor, queue), its count and why."""
    return "; ".join(
        f"actor {s.actor!r} on queue {s.queue!r}: {s.waiting} waiting ({REASONS[s.reason]})"
        for s in stranded
    )


__all__ = ["NOTE", "REASONS", "as_fields", "live_within", "summary"]
