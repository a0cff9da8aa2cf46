"""The CONSUMER span of one attempt (``process {queue}``), when the worker traces.

Started when a consumer takes the job (after the actor lookup), current in
the actor's task (and so in a sync actor's thread: its context is copied
there), ended when the attempt's outcome is decided, before the batched
write lands. Its parent is the job's creation context (the enqueue's PRODUCER
span), and it links to it too; see docs/operations-reference.md, "Traces", for
why.

A consumer that does not trace pays three ``is not None`` tests per job for all
this (``benchmarks/bench_tracing.py`` times them).
"""

from __future__ import annotations

import contextvars
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from taskq.app.observability.tracing import (
    ERROR_TYPE,
    MESSAGING_CLIENT_ID,
    MESSAGING_CONSUMER_GROUP_NAME,
    MESSAGING_DESTINATION_NAME,
    MESSAGING_MESSAGE_ID,
    MESSAGING_OPERATION_NAME,
    MESSAGING_OPERATION_TYPE,
    MESSAGING_SYSTEM,
    PROCESS,
    SYSTEM,
    TASKQ_ACTOR,
    TASKQ_ATTEMPT,
    TASKQ_OUTCOME,
    creation_context,
    record_error,
)
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
    SnoozeUntil,
)

#: ``messaging.taskq.job.outcome`` per decision: the attempt history's words.
OUTCOMES: Final[dict[type, str]] = {
    Complete: "succeeded",
    Retry: "retried",
    SnoozeUntil: "snoozed",
    Fail: "failed",
    Cancel: "cancelled",
    Interrupt: "interrupted",
}
#: The outcome of an attempt whose abandonment was queued (it ignored a cancel past both
#: graces): the abandonment's write, not the consumer's, ends the job.
ABANDONED: Final = "abandoned"
#: The worker stopped it or stopped waiting for it (its shutdown, its consumer cancelled).
INTERRUPTED: Final = "interrupted"
#: Claimed but never run: its start mark did not find the lease held (another worker
#: has it now) or could not be written.
NOT_STARTED: Final = "not_started"


def start(tracer: Tracer, job: ClaimedJob, *, worker_id: str, group: str) -> Span:
    """The CONSUMER span of the attempt of ``job`` now starting (not made current)."""
    attributes: dict[str, AttributeValue] = {
        MESSAGING_SYSTEM: SYSTEM,
        MESSAGING_OPERATION_TYPE: PROCESS,
        MESSAGING_OPERATION_NAME: PROCESS,
        MESSAGING_DESTINATION_NAME: job.queue,
        MESSAGING_MESSAGE_ID: str(job.id),
        MESSAGING_CONSUMER_GROUP_NAME: group,
        MESSAGING_CLIENT_ID: worker_id,
        TASKQ_ACTOR: job.actor,
        TASKQ_ATTEMPT: max(job.attempt, 1),
    }
    name = f"{PROCESS} {job.queue}"
    creation = creation_context(job.trace_id, job.span_id)
    if creation is None:
        return tracer.start_span(name, kind=SpanKind.CONSUMER, attributes=attributes)
    links = [Link(creation)]
    ambient = trace.get_current_span().get_span_context()
    if ambient.is_valid:
        links.append(Link(ambient))  # the conventions' rule when the parent is not it
    parent = trace.set_span_in_context(NonRecordingSpan(creation))
    return tracer.start_span(
        name, context=parent, kind=SpanKind.CONSUMER, attributes=attributes, links=links
    )


def task_context(span: Span) -> contextvars.Context:
    """A copy of the current context with ``span`` current: the actor task's context."""
    context = contextvars.copy_context()
    context.run(otel_context.attach, trace.set_span_in_context(span))
    return context


def end(span: Span, outcome: Outcome, decision: Decision, *, abandoned: bool = False) -> None:
    """End ``span`` of the attempt that ended with ``outcome``, followed by ``decision``:
    its outcome word and, for an error, ``error.type``, an ``exception`` event (the
    error the actor raised, else the failure the decision records) and status ERROR."""
    if abandoned:
        end_unfinished(span, ABANDONED, error_type="Abandoned")
        return
    span.set_attribute(TASKQ_OUTCOME, OUTCOMES[decision.__class__])
    if isinstance(decision, Retry | Fail) and isinstance(outcome, Raised):
        record_error(span, outcome.error_class, outcome.message, outcome.traceback)
    elif isinstance(decision, Fail):
        record_error(span, decision.error_class, decision.error, decision.traceback)
    elif isinstance(decision, Interrupt):
        span.set_attribute(ERROR_TYPE, decision.error_class)
        span.set_status(Status(StatusCode.ERROR, f"{decision.error_class}: {decision.error}"))
    span.end()


def end_unfinished(span: Span, outcome: str, *, error_type: str | None = None) -> None:
    """End ``span`` of an attempt the worker did not conclude itself (``outcome`` says
    why); with ``error_type``, as an error."""
    span.set_attribute(TASKQ_OUTCOME, outcome)
    if error_type is not None:
        span.set_attribute(ERROR_TYPE, error_type)
        span.set_status(Status(StatusCode.ERROR, outcome))
    span.end()


__all__ = ["OUTCOMES", "end", "end_unfinished", "start", "task_context"]
