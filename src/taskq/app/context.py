"""JobContext: what an actor may learn about the job it is running.

An actor asks for it by annotating one parameter ``JobContext[Payload]`` (any
name). The worker builds one per attempt with a fresh ``cancel_event``; the
event is set when a cancel reaches the cooperative phase, so a long actor can
poll ``ctx.cancelled`` (sync actors too: reading the flag is thread-safe) and
return early.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Generic, TypeVar

from taskq.domain.job import JSON, ClaimedJob

if TYPE_CHECKING:
    from opentelemetry.trace import Span

P = TypeVar("P")


# Not slotted: a slotted frozen generic dataclass cannot be built as
# ``JobContext[Model](...)`` on Python 3.11 (typing sets ``__orig_class__``).
@dataclass(frozen=True, kw_only=True)
class JobContext(Generic[P]):
    """One attempt of one job, as its actor sees it.

    ``attempt`` counts from 1 and is the attempt now running; ``max_attempts``
    is ``None`` for an unbounded (indefinite) policy. ``schedule_to_close`` is
    the job's deadline, if any. ``trace_id``/``span_id`` are the job's
    creation context as stored (the enqueue's PRODUCER span, W3C hex, or the
    caller's own ids). ``span`` is this attempt's CONSUMER span when the worker
    traces (an SDK is configured and ``TASKQ_OTEL_ENABLED``), else None; it is
    also the current span while the actor runs (``trace.get_current_span()``).
    """

    payload: P
    job_id: int
    attempt: int
    max_attempts: int | None
    worker_id: str
    queue: str
    actor: str
    cancel_event: asyncio.Event = field(default_factory=asyncio.Event)
    metadata: Mapping[str, JSON] = field(default_factory=dict)
    scheduled_at: datetime
    schedule_to_close: datetime | None = None
    trace_id: str | None = None
    span_id: str | None = None
    span: Span | None = None

    @property
    def cancelled(self) -> bool:
        """True once a cancel of this job was requested (the cooperative phase began)."""
        return self.cancel_event.is_set()

    @classmethod
    def for_claimed(
        cls,
        job: ClaimedJob,
        payload: P,
        *,
        worker_id: str,
        cancel_event: asyncio.Event | None = None,
        span: Span | None = None,
    ) -> JobContext[P]:
        """The context of the attempt ``job`` (just claimed by ``worker_id``) is starting."""
        return cls(
            payload=payload,
            job_id=job.id,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            worker_id=worker_id,
            queue=job.queue,
            actor=job.actor,
            cancel_event=cancel_event if cancel_event is not None else asyncio.Event(),
            metadata=dict(job.metadata),
            scheduled_at=job.scheduled_at,
            schedule_to_close=job.schedule_to_close,
            trace_id=job.trace_id,
            span_id=job.span_id,
            span=span,
        )

    def __repr__(self) -> str:
        # The payload may hold secrets: never echoed into logs through a repr.
        return (
            f"JobContext(job_id={self.job_id}, actor={self.actor!r}, queue={self.queue!r}, "
            f"attempt={self.attempt}, cancelled={self.cancelled})"
        )


__all__ = ["JobContext"]
