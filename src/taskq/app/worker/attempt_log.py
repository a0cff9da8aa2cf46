"""What the worker logs about each attempt: every failure, and at DEBUG every start and end.

One record per event, fields as data (``events``)::

    when                                    event                level
    ──────────────────────────────────────  ───────────────────  ───────
    the actor is called                     job-started          DEBUG
    an error, and the job will run again    job-attempt-failed   WARNING
    the job fails for good                  job-failed           ERROR
    the attempt ended, however              job-finished         DEBUG

Each names ``job_id``, ``actor``, ``queue`` and ``attempt`` (and ``max_attempts``
when the actor's policy bounds them). ``job-attempt-failed`` says when the
job runs again (``retry_at``); both failure records carry the error's class
and message and, when the error had one, its traceback (the record's
``exc_text``: the ``exception`` key in JSON, the lines after the record on
a console), the same bounded text the attempt history keeps.
``job-finished`` says how the attempt ended (``outcome``: succeeded, retried,
snoozed, failed, cancelled) and how long it ran (``duration_seconds``, from
when its consumer took it).

A succeeded job costs two calls here (``started``, ``concluded``) and a level
check in each (``Logger.isEnabledFor``: the logging module's own cache, cleared
whenever a level changes, so a level set at run time applies at once): nothing
is formatted and no record is made while DEBUG is off
(``benchmarks/bench_attempt_log.py`` times it).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from taskq.app.worker import events
from taskq.app.worker.state import ActiveJob
from taskq.app.worker.task_views import WorkerBasics
from taskq.domain.job import ClaimedJob
from taskq.domain.outcomes import (
    Cancel,
    Complete,
    Decision,
    Fail,
    Interrupt,
    Outcome,
    Raised,
    Retry,
)

_DEBUG: Final = logging.DEBUG
_enabled: Final = events.log.isEnabledFor

#: ``job-finished``'s ``outcome`` per decision (the attempt history's words).
_ENDED_AS: Final[dict[type, str]] = {
    Complete: "succeeded",
    Retry: "retried",
    Fail: "failed",
    Cancel: "cancelled",
    Interrupt: "interrupted",
}


def started(job: ClaimedJob) -> None:
    """The actor of ``job`` is about to be called (``job-started`` at DEBUG)."""
    if _enabled(_DEBUG):
        events.emit(
            events.JOB_STARTED,
            _DEBUG,
            job_id=job.id,
            actor=job.actor,
            queue=job.queue,
            attempt=max(job.attempt, 1),
        )


def concluded(active: ActiveJob, outcome: Outcome, decision: Decision, state: WorkerBasics) -> None:
    """The attempt of ``active`` ended with ``outcome``, and ``decision`` is what follows.

    An error the job will be retried after is a WARNING, a job failed for good
    an ERROR. A job whose abandonment is already queued logs neither: its
    outcome is the abandonment's (``job-abandoned``).
    """
    kind = decision.__class__
    if kind is Complete:
        if _enabled(_DEBUG):
            _finished(active, "succeeded", state)
        return
    if active.abandon_queued:
        return
    if isinstance(decision, Fail):
        events.emit(
            events.JOB_FAILED,
            logging.ERROR,
            traceback=decision.traceback,
            **job_fields(active),
            error_class=decision.error_class,
            error=decision.error,
        )
    elif isinstance(decision, Retry) and isinstance(outcome, Raised):
        events.emit(
            events.JOB_ATTEMPT_FAILED,
            logging.WARNING,
            traceback=decision.traceback,
            **job_fields(active),
            error_class=decision.error_class,
            error=decision.error,
            retry_at=decision.run_at.isoformat(),
        )
    if _enabled(_DEBUG):
        _finished(active, _ENDED_AS.get(kind, "snoozed"), state)


def job_fields(active: ActiveJob) -> dict[str, Any]:
    """The fields that say which attempt of which job, for every event about one."""
    job = active.job
    fields: dict[str, Any] = {
        "job_id": job.id,
        "actor": job.actor,
        "queue": job.queue,
        "attempt": max(job.attempt, 1),  # as the decision counts it
    }
    max_attempts = active.ref.retry.job_max_attempts
    if max_attempts is not None:
        fields["max_attempts"] = max_attempts
    return fields


def _finished(active: ActiveJob, outcome: str, state: WorkerBasics) -> None:
    events.emit(
        events.JOB_FINISHED,
        _DEBUG,
        **job_fields(active),
        outcome=outcome,
        duration_seconds=round(max(state.clock.monotonic() - active.started_mono, 0.0), 6),
    )


__all__ = ["concluded", "job_fields", "started"]
