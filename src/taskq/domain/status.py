"""Job statuses and the legal transitions between them.

::

    scheduled ──promote──▶ pending ──claim──▶ running ──▶ succeeded
        ▲  │                 │  ▲               │  │ ├──▶ failed
        │  │                 │  └──drain/reclaim┘  │ ├──▶ cancelled
        │  └──cancel/deadline┴──▶ cancelled/failed │ ├──▶ abandoned
        └───────────retry / snooze / release───────┘ └──▶ crashed

Terminal statuses never change again, with one exception that is not a
lifecycle step: an operator's retry (:data:`OPERATOR_RETRYABLE`) puts a failed,
cancelled, crashed or abandoned job back to pending for one more attempt. Adapters
must never produce any other transition outside :data:`TRANSITIONS`.
"""

from __future__ import annotations

from enum import StrEnum

from taskq.domain.errors import IllegalTransition


class JobStatus(StrEnum):
    PENDING = "pending"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ABANDONED = "abandoned"
    CRASHED = "crashed"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL


TERMINAL: frozenset[JobStatus] = frozenset(
    {
        JobStatus.SUCCEEDED,
        JobStatus.FAILED,
        JobStatus.CANCELLED,
        JobStatus.ABANDONED,
        JobStatus.CRASHED,
    }
)

#: Waiting to be claimed (pending) or waiting for its time (scheduled).
WAITING: frozenset[JobStatus] = frozenset({JobStatus.PENDING, JobStatus.SCHEDULED})

TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    # promote when due; cancel before running; fail when the deadline passes first
    JobStatus.SCHEDULED: frozenset({JobStatus.PENDING, JobStatus.CANCELLED, JobStatus.FAILED}),
    # claim; cancel before running; deadline sweep; a pending job may be deferred
    JobStatus.PENDING: frozenset(
        {JobStatus.RUNNING, JobStatus.CANCELLED, JobStatus.FAILED, JobStatus.SCHEDULED}
    ),
    JobStatus.RUNNING: frozenset(
        {
            JobStatus.SUCCEEDED,
            JobStatus.FAILED,
            JobStatus.CANCELLED,
            JobStatus.ABANDONED,
            JobStatus.CRASHED,
            JobStatus.PENDING,  # drained before start, reclaimed after lease expiry, isolate-self
            JobStatus.SCHEDULED,  # retry, snooze, release of an unknown actor
        }
    ),
    JobStatus.SUCCEEDED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELLED: frozenset(),
    JobStatus.ABANDONED: frozenset(),
    JobStatus.CRASHED: frozenset(),
}


#: What an operator may send back to pending (``taskq jobs retry``): a job that ended
#: without success. A succeeded job is not run again, and an active one is not finished.
OPERATOR_RETRYABLE: frozenset[JobStatus] = frozenset(
    {JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.CRASHED, JobStatus.ABANDONED}
)

_RETRY_REFUSALS: dict[JobStatus, str] = {
    JobStatus.PENDING: "it is pending: it is waiting to run already",
    JobStatus.SCHEDULED: "it is scheduled: it is waiting to run already",
    JobStatus.RUNNING: "it is running: it may still succeed; cancel it first and retry it "
    "once it has ended",
    JobStatus.SUCCEEDED: "it succeeded: a succeeded job is not run again; enqueue a new job "
    "instead",
}


def retry_refusal(status: JobStatus) -> str | None:
    """Why an operator's retry of a job in ``status`` is refused; None when it is allowed."""
    if status in OPERATOR_RETRYABLE:
        return None
    return _RETRY_REFUSALS[status]


def can_transition(src: JobStatus, dst: JobStatus) -> bool:
    return dst in TRANSITIONS[src]


def check_transition(src: JobStatus, dst: JobStatus) -> None:
    """Raise :class:`IllegalTransition` unless ``src → dst`` is legal."""
    if not can_transition(src, dst):
        raise IllegalTransition(f"a job cannot go from {src.value} to {dst.value}")
