"""The options of one enqueue, shared by ``JobsClient.enqueue``, ``enqueue_many`` and
``ActorRef.new_job``.

:class:`EnqueueArgs` is how the three take them (typed keyword arguments);
:class:`EnqueueOptions` checks them, in one place, and turns them into the job
an actor enqueues. A unit test pins that the two list the same options.
Bad options raise ``TypeError``/``ValueError`` naming the option.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, TypedDict, cast

from taskq.app.actors.json_values import json_copy
from taskq.domain.job import JSON, NewJob, build_new_job
from taskq.domain.retry import RetryPolicy, deadline_at_enqueue
from taskq.domain.storable import timeout_problem


class EnqueueArgs(TypedDict, total=False):
    """The keyword arguments of an enqueue (see :class:`EnqueueOptions` for each)."""

    queue: str | None
    scheduled_at: datetime | None
    priority: int
    schedule_to_close: datetime | None
    identity_key: str | None
    fairness_key: str | None
    idempotency_key: str | None
    metadata: Mapping[str, JSON] | None
    tags: Iterable[str]
    trace_id: str | None
    span_id: str | None
    timeout: timedelta | None


@dataclass(frozen=True, slots=True, kw_only=True)
class EnqueueOptions:
    """One enqueue's options, checked when built.

    ``queue`` overrides the actor's; ``scheduled_at`` in the future schedules
    the job; ``schedule_to_close`` is its deadline; ``identity_key`` /
    ``idempotency_key`` may return an existing job; ``fairness_key`` is its
    cohort on a round-robin queue; ``tags`` is read once (a generator is fine)
    and kept as a tuple, ``metadata`` as a copy; ``trace_id``/``span_id`` are
    stored as given; ``timeout`` bounds each attempt instead of the actor's.
    """

    queue: str | None = None
    scheduled_at: datetime | None = None
    priority: int = 0
    schedule_to_close: datetime | None = None
    identity_key: str | None = None
    fairness_key: str | None = None
    idempotency_key: str | None = None
    metadata: Mapping[str, JSON] | None = None
    tags: Iterable[str] = ()
    trace_id: str | None = None
    span_id: str | None = None
    timeout: timedelta | None = None

    def __post_init__(self) -> None:
        # The usual enqueue passes few options: each check starts with its cheap case.
        priority = self.priority
        if priority.__class__ is not int and (
            isinstance(priority, bool) or not isinstance(priority, int)
        ):
            raise TypeError(f"priority must be an int, got {priority!r}")
        if self.tags != ():
            object.__setattr__(self, "tags", _tags(self.tags))
        if (
            self.identity_key is not None
            or self.fairness_key is not None
            or self.idempotency_key is not None
            or self.trace_id is not None
            or self.span_id is not None
        ):
            _check_texts(
                identity_key=self.identity_key,
                fairness_key=self.fairness_key,
                idempotency_key=self.idempotency_key,
                trace_id=self.trace_id,
                span_id=self.span_id,
            )
        queue = self.queue
        if queue is not None and (not isinstance(queue, str) or not queue):
            raise ValueError(f"queue must be a non-empty string, got {queue!r}")
        if self.timeout is not None:
            problem = timeout_problem(self.timeout)
            if problem is not None:
                error = TypeError if not isinstance(self.timeout, timedelta) else ValueError
                raise error(f"timeout {problem}")
        if self.schedule_to_close is not None:
            _check_aware(self.schedule_to_close, "schedule_to_close")
        if self.scheduled_at is not None:
            _check_aware(self.scheduled_at, "scheduled_at")
        metadata = self.metadata
        if metadata:  # a copy: the caller may change theirs afterwards
            object.__setattr__(self, "metadata", json_copy(dict(metadata), "metadata"))

    def new_job(
        self,
        *,
        actor: str,
        queue: str,
        payload: dict[str, JSON],
        retry: RetryPolicy,
        max_pending: int | None,
        now: datetime,
    ) -> NewJob:
        """The job of ``actor`` (home ``queue``, ``retry``, ``max_pending``) for a dumped
        ``payload`` enqueued at ``now``: ``retry.job_max_attempts`` stored, an indefinite
        policy's ``time_budget`` turned into the deadline (the earlier of it and
        ``schedule_to_close``). ``ValueError`` when that deadline is not after
        ``scheduled_at``: the job could never start."""
        _check_aware(now, "now")
        schedule_to_close = self.schedule_to_close
        scheduled_at = self.scheduled_at
        deadline = deadline_at_enqueue(retry, enqueued_at=now, schedule_to_close=schedule_to_close)
        if scheduled_at is not None and deadline is not None and deadline <= scheduled_at:
            source = (
                "schedule_to_close"
                if deadline == schedule_to_close
                else "the deadline set by the actor's retry time_budget"
            )
            raise ValueError(
                f"{source} ({deadline.isoformat()}) is not after scheduled_at "
                f"({scheduled_at.isoformat()}): the job could never start"
            )
        return build_new_job(
            actor=actor,
            queue=self.queue if self.queue is not None else queue,
            payload=payload,
            priority=self.priority,
            scheduled_at=scheduled_at,
            schedule_to_close=deadline,
            max_attempts=retry.job_max_attempts,
            identity_key=self.identity_key,
            fairness_key=self.fairness_key,
            idempotency_key=self.idempotency_key,
            # Its own dict (a store may keep it), shallow: the values were copied when
            # the options were built. Tags were made a tuple then too.
            metadata=dict(self.metadata) if self.metadata else {},
            tags=cast("tuple[str, ...]", self.tags),
            trace_id=self.trace_id,
            span_id=self.span_id,
            max_pending=max_pending,
            attempt_timeout=self.timeout,
        )


def _tags(tags: object) -> tuple[str, ...]:
    """``tags`` as a tuple, read once (a generator can be read only once)."""
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise TypeError(f"tags must be an iterable of strings, got {tags!r}")
    materialized = tuple(tags)
    if not all(isinstance(t, str) for t in materialized):
        raise TypeError(f"tags must be an iterable of strings, got {materialized!r}")
    return materialized


def _check_texts(**options: object) -> None:
    for what, value in options.items():
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{what} must be a str or None, got {type(value).__name__} {value!r}")


def _check_aware(value: object, what: str) -> None:
    if not isinstance(value, datetime):
        hint = (
            " (a delay is now + delay, now an aware datetime)"
            if isinstance(value, timedelta)
            else ""
        )
        raise TypeError(
            f"{what} must be a timezone-aware datetime{hint}, got {type(value).__name__} {value!r}"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got {value!r}")


#: An enqueue that passes no options (the usual one), checked once.
NO_OPTIONS: Final = EnqueueOptions()

__all__ = ["NO_OPTIONS", "EnqueueArgs", "EnqueueOptions"]
