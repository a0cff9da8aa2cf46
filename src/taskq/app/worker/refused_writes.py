"""Terminal writes a store refused as a batch because one of them holds what it cannot keep.

A store refuses such a batch whole, with ``ValueError`` or ``TypeError``, before
it writes any of it (a contract of the port). Left at that, one job's
unstorable result would hold back every job sharing its round trip, and take
them down again at each retry. So the batch is written again one write at a
time, and a write refused alone is replaced by a failure of its job that says
why: the job is not run again for an outcome that could never be stored.

The actor's result is checked as it is dumped (``ActorRef.dump_result``), so
with the built-in adapters this is the rare case: a custom store's own limits.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

from taskq.app.worker import events
from taskq.app.worker.store_roles import CompleterStore
from taskq.domain.job import Lease
from taskq.domain.outcomes import exception_text
from taskq.domain.status import JobStatus
from taskq.ports.store_params import Finish

#: What a store raises for a write holding a value it cannot keep.
UNSTORABLE: Final = (ValueError, TypeError)


@dataclass(frozen=True, slots=True)
class FailedInstead:
    """The answer to a write the store refused alone: its job was written failed instead
    (``lost``: or would have been, had its lease still been held)."""

    lost: bool


#: A landed write's answer: whether its lease was no longer held, or that its job was
#: failed instead.
Written = bool | FailedInstead
#: A write's answer, or why it did not land.
Answer = Written | Exception
#: How each ``finish_many`` round trip is awaited (the worker bounds it in time).
Bound = Callable[[Awaitable[list[Lease]]], Awaitable[list[Lease]]]


def _unbounded(work: Awaitable[list[Lease]]) -> Awaitable[list[Lease]]:
    return work


def finish_flush(
    store: CompleterStore, *, bound: Bound = _unbounded
) -> Callable[[Sequence[Finish]], Awaitable[Sequence[Answer]]]:
    """The completer's flush: ``outcomes`` in one round trip; one by one if refused.
    Each round trip is awaited through ``bound``."""

    async def flush(outcomes: Sequence[Finish]) -> Sequence[Answer]:
        try:
            lost = set(await bound(store.finish_many(outcomes)))
        except UNSTORABLE:
            return await write_one_by_one(store, outcomes, bound=bound)
        return [outcome.lease in lost for outcome in outcomes]

    return flush


async def write_one_by_one(
    store: CompleterStore, outcomes: Sequence[Finish], *, bound: Bound = _unbounded
) -> list[Answer]:
    """Each of ``outcomes`` in a round trip of its own; a refused one fails its job instead."""
    answers: list[Answer] = []
    for index, outcome in enumerate(outcomes):
        try:
            lost = await bound(store.finish_many([outcome]))
        except UNSTORABLE as exc:
            answers.append(await _fail_instead(store, outcome, exc, bound))
        except Exception as exc:
            # The database failed: this write and the rest are retried (the consumers
            # retry each with backoff), not tried here one slow failure after another.
            answers.extend(exc for _ in outcomes[index:])
            break
        else:
            answers.append(bool(lost))
    return answers


async def _fail_instead(
    store: CompleterStore, outcome: Finish, refusal: Exception, bound: Bound
) -> Answer:
    reason = f"{type(refusal).__name__}: {exception_text(refusal)}"
    events.emit(
        events.JOB_WRITE_FAILED,
        logging.ERROR,
        job_id=outcome.lease.job_id,
        write=outcome.status.value,
        error=reason,
        written_instead=JobStatus.FAILED.value,
    )
    failure = Finish(
        lease=outcome.lease,
        status=JobStatus.FAILED,
        error=f"the job's outcome ({outcome.status.value}) could not be stored: {reason}",
        error_class=type(refusal).__name__,
        started_ago=outcome.started_ago,
        now=outcome.now,
    )
    try:
        return FailedInstead(lost=bool(await bound(store.finish_many([failure]))))
    except Exception as exc:
        return exc


__all__ = ["UNSTORABLE", "Answer", "FailedInstead", "Written", "finish_flush", "write_one_by_one"]
