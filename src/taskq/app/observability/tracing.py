"""OpenTelemetry traces of enqueues and attempts, through ``opentelemetry-api`` only.

The SDK, its sampler and its exporters are the application's: TaskQ asks the
global tracer provider (or the one a ``JobsClient`` / ``Worker`` was given)
for a tracer, and makes no span at all while that provider is the API's
default (no SDK configured) or ``TASKQ_OTEL_ENABLED`` is false. What the spans
are, their attributes and why the consumer span is a child of the producer
span: docs/operations-reference.md, "Traces".

The job row carries the *creation context*: ``trace_id``/``span_id`` as W3C
hex (32 and 16 lowercase digits). The enqueue stores its PRODUCER span's
context there, unless the caller gave ``trace_id``/``span_id`` of its own
(a custom creation context, stored as given and linked from the span). Only a
sampled context is stored: a job enqueued in a trace the sampler dropped
starts a trace of its own at the worker.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    NoOpTracer,
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
    TracerProvider,
    format_span_id,
    format_trace_id,
)
from opentelemetry.util.types import AttributeValue

from taskq.domain.job import EnqueueResult, NewJob, UniformJobs, with_trace_context
from taskq.ports.queue_store import JobEnqueuer

#: ``messaging.system``: not one of the conventions' well-known values, so TaskQ's own.
SYSTEM: Final = "taskq"
#: The instrumentation scope's name (``InstrumentationScope.name`` of every span).
SCOPE: Final = "taskq"

# The messaging semantic conventions' attributes.
MESSAGING_SYSTEM: Final = "messaging.system"
MESSAGING_OPERATION_TYPE: Final = "messaging.operation.type"
MESSAGING_OPERATION_NAME: Final = "messaging.operation.name"
MESSAGING_DESTINATION_NAME: Final = "messaging.destination.name"
MESSAGING_MESSAGE_ID: Final = "messaging.message.id"
MESSAGING_BATCH_MESSAGE_COUNT: Final = "messaging.batch.message_count"
MESSAGING_CONSUMER_GROUP_NAME: Final = "messaging.consumer.group.name"
MESSAGING_CLIENT_ID: Final = "messaging.client.id"
ERROR_TYPE: Final = "error.type"

# TaskQ's own, in the ``messaging.{system}`` namespace the conventions reserve for them.
TASKQ_ACTOR: Final = "messaging.taskq.actor"
TASKQ_ATTEMPT: Final = "messaging.taskq.job.attempt"
TASKQ_OUTCOME: Final = "messaging.taskq.job.outcome"
TASKQ_WAS_EXISTING: Final = "messaging.taskq.job.was_existing"

#: ``messaging.operation.name`` of the producer span (``send`` type) and the consumer span.
ENQUEUE: Final = "enqueue"
PROCESS: Final = "process"

#: While no SDK is configured, how often (seconds) TaskQ looks again whether one is: a
#: provider set after a worker or client started is used from then on, and the look
#: (about a microsecond) is not paid per job.
LOOK_AGAIN_EVERY: Final = 1.0

_HEX: Final = frozenset("0123456789abcdef")


class Tracing:
    """Where TaskQ's spans go: a tracer, or nowhere while no SDK is configured.

    ``provider`` is the tracer provider to use (default: the global one, as
    ``trace.set_tracer_provider`` set it, resolved lazily). The API's own
    providers (the proxy that stands in before an SDK is set, ``NoOpTracerProvider``)
    and a disabled SDK (``OTEL_SDK_DISABLED``) count as none.
    """

    __slots__ = ("_next_look", "_provider", "_tracer")

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self._provider = provider
        self._tracer: Tracer | None = None
        self._next_look = 0.0
        self.tracer()

    def __repr__(self) -> str:
        return f"<Tracing {'on' if self._tracer is not None else 'no SDK'}>"

    def tracer(self) -> Tracer | None:
        """The tracer to make spans with, or None (no SDK): cheap enough for every job."""
        tracer = self._tracer
        if tracer is None:
            now = time.monotonic()
            if now >= self._next_look:
                self._next_look = now + LOOK_AGAIN_EVERY
                tracer = self._tracer = _resolve(self._provider)
        return tracer

    def traced(self, enqueuer: JobEnqueuer) -> JobEnqueuer:
        """``enqueuer`` with its enqueues in PRODUCER spans (or, with no SDK, passing the
        caller's sampled span context on to the jobs)."""
        return TracedEnqueuer(enqueuer, self.tracer())


def _resolve(provider: TracerProvider | None) -> Tracer | None:
    found = provider if provider is not None else trace.get_tracer_provider()
    if isinstance(found, ProxyTracerProvider | NoOpTracerProvider):
        return None
    tracer = found.get_tracer(SCOPE, _version())
    return None if isinstance(tracer, NoOpTracer) else tracer


def _version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("taskq")
    except metadata.PackageNotFoundError:
        return None


def new_tracing(enabled: bool, provider: TracerProvider | None = None) -> Tracing | None:
    """The tracing of a client or worker: None (nothing at all) when not ``enabled``."""
    return Tracing(provider) if enabled else None


# -- the creation context on the job row -------------------------------------------------


def stored_ids(context: SpanContext) -> tuple[str, str] | None:
    """``(trace_id, span_id)`` to store for ``context``: W3C hex, or None when it is not
    a valid, sampled context."""
    if not (context.is_valid and context.trace_flags.sampled):
        return None
    return format_trace_id(context.trace_id), format_span_id(context.span_id)


def creation_context(trace_id: str | None, span_id: str | None) -> SpanContext | None:
    """The creation context a job row holds, as a remote sampled ``SpanContext``; None when
    the row holds none, or ids that are not W3C hex (a caller's own strings)."""
    if trace_id is None or span_id is None:
        return None
    if len(trace_id) != 32 or len(span_id) != 16 or not _HEX.issuperset(trace_id + span_id):
        return None
    context = SpanContext(
        trace_id=int(trace_id, 16),
        span_id=int(span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return context if context.is_valid else None


def record_error(span: Span, error_type: str, message: str, stacktrace: str | None) -> None:
    """Mark ``span`` failed: ``error.type``, status ERROR and an ``exception`` event
    (the conventions' attributes; ``stacktrace`` is TaskQ's bounded traceback text)."""
    span.set_attribute(ERROR_TYPE, error_type)
    event: dict[str, AttributeValue] = {
        "exception.type": error_type,
        "exception.message": message,
    }
    if stacktrace is not None:
        event["exception.stacktrace"] = stacktrace
    span.add_event("exception", event)
    span.set_status(Status(StatusCode.ERROR, f"{error_type}: {message}"))


# -- the PRODUCER span -------------------------------------------------------------------


class TracedEnqueuer:
    """A :class:`~taskq.ports.queue_store.JobEnqueuer` whose calls run in a PRODUCER span.

    One span per call: ``enqueue {queue}`` for one job, and for a batch too
    (``messaging.batch.message_count``: its size), made current while the store
    writes. Each job without ids of its own stores that span's context; a job
    with ``trace_id``/``span_id`` keeps them, and the span links to them. With
    ``tracer`` None (no SDK), no span: a job without ids stores the caller's
    current span context, when it is valid and sampled (propagated from
    upstream, say), so the trace still reaches the worker.
    """

    __slots__ = ("_inner", "_tracer")

    def __init__(self, inner: JobEnqueuer, tracer: Tracer | None) -> None:
        self._inner = inner
        self._tracer = tracer

    def __repr__(self) -> str:
        return f"<TracedEnqueuer {self._inner!r}>"

    async def enqueue(self, job: NewJob, *, now: datetime | None = None) -> EnqueueResult:
        tracer = self._tracer
        custom = job.trace_id is not None or job.span_id is not None
        if tracer is None:
            ids = None if custom else stored_ids(trace.get_current_span().get_span_context())
            return await self._inner.enqueue(
                job if ids is None else with_trace_context(job, *ids), now=now
            )
        span = tracer.start_span(
            f"{ENQUEUE} {job.queue}",
            kind=SpanKind.PRODUCER,
            attributes=_send_attributes(job.queue, job.actor, None),
            links=_custom_links((job,) if custom else ()),
        )
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            if not custom:
                ids = stored_ids(span.get_span_context())
                if ids is not None:
                    job = with_trace_context(job, *ids)
            try:
                result = await self._inner.enqueue(job, now=now)
            except BaseException as exc:
                _failed(span, exc)
                raise
            span.set_attribute(MESSAGING_MESSAGE_ID, str(result.job_id))
            if result.was_existing:
                span.set_attribute(TASKQ_WAS_EXISTING, True)
            return result

    async def enqueue_many(
        self, jobs: Sequence[NewJob], *, now: datetime | None = None
    ) -> list[EnqueueResult]:
        tracer = self._tracer
        if not jobs:
            return await self._inner.enqueue_many(jobs, now=now)
        if tracer is None:
            ids = stored_ids(trace.get_current_span().get_span_context())
            batch = jobs if ids is None else _with_ids(jobs, ids)
            return await self._inner.enqueue_many(batch, now=now)
        queue, actor = _shared(jobs)
        span = tracer.start_span(
            f"{ENQUEUE} {queue}" if queue is not None else ENQUEUE,
            kind=SpanKind.PRODUCER,
            attributes=_send_attributes(queue, actor, len(jobs)),
            links=_custom_links(_customs(jobs)),
        )
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            ids = stored_ids(span.get_span_context())
            batch = jobs if ids is None else _with_ids(jobs, ids)
            try:
                return await self._inner.enqueue_many(batch, now=now)
            except BaseException as exc:
                _failed(span, exc)
                raise


def _send_attributes(
    queue: str | None, actor: str | None, count: int | None
) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        MESSAGING_SYSTEM: SYSTEM,
        MESSAGING_OPERATION_TYPE: "send",
        MESSAGING_OPERATION_NAME: ENQUEUE,
    }
    if queue is not None:
        attributes[MESSAGING_DESTINATION_NAME] = queue
    if actor is not None:
        attributes[TASKQ_ACTOR] = actor
    if count is not None:
        attributes[MESSAGING_BATCH_MESSAGE_COUNT] = count
    return attributes


def _shared(jobs: Sequence[NewJob]) -> tuple[str | None, str | None]:
    """The queue and the actor every job of ``jobs`` has (None where they differ)."""
    if isinstance(jobs, UniformJobs):
        return jobs.template.queue, jobs.template.actor
    queues = {job.queue for job in jobs}
    actors = {job.actor for job in jobs}
    return (
        next(iter(queues)) if len(queues) == 1 else None,
        next(iter(actors)) if len(actors) == 1 else None,
    )


def _customs(jobs: Sequence[NewJob]) -> Sequence[NewJob]:
    """The jobs of ``jobs`` that carry ids of their own (one stands for a uniform batch)."""
    if isinstance(jobs, UniformJobs):
        template = jobs.template
        custom = template.trace_id is not None or template.span_id is not None
        return (template,) if custom else ()
    return [job for job in jobs if job.trace_id is not None or job.span_id is not None]


def _custom_links(jobs: Sequence[NewJob]) -> list[Link] | None:
    """Links to the custom creation contexts of ``jobs`` (each once)."""
    contexts: dict[tuple[int, int], SpanContext] = {}
    for job in jobs:
        context = creation_context(job.trace_id, job.span_id)
        if context is not None:
            contexts.setdefault((context.trace_id, context.span_id), context)
    return [Link(context) for context in contexts.values()] or None


def _with_ids(jobs: Sequence[NewJob], ids: tuple[str, str]) -> Sequence[NewJob]:
    """``jobs``, each without ids of its own given ``ids`` (a uniform batch stays one)."""
    if isinstance(jobs, UniformJobs):
        template = jobs.template
        if template.trace_id is not None or template.span_id is not None:
            return jobs
        return UniformJobs(with_trace_context(template, *ids), jobs.payloads)
    return [
        job
        if job.trace_id is not None or job.span_id is not None
        else with_trace_context(job, *ids)
        for job in jobs
    ]


def _failed(span: Span, exc: BaseException) -> None:
    """An enqueue that raised: what the caller sees, on its span."""
    from taskq.domain.outcomes import exception_text

    span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exception_text(exc)}"))


__all__ = [
    "ENQUEUE",
    "PROCESS",
    "SYSTEM",
    "TracedEnqueuer",
    "Tracing",
    "creation_context",
    "new_tracing",
    "record_error",
    "stored_ids",
]
