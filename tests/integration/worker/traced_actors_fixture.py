"""Actors for the cross-process trace test, and the OpenTelemetry SDK of the worker running them.

Imported by ``taskq worker --actors`` with ``TRACED_SPANS_FILE`` set, this module configures the
process's global tracer provider, as an application's actors module would (and as
docs/operations.md says to: a ``BatchSpanProcessor``, flushed when the worker's process
exits): an SDK that writes every span as one JSON line to that file. Imported without it (by
the test, for the actor refs), it configures nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import format_span_id, format_trace_id
from pydantic import BaseModel

from taskq import JobContext, JobsClient, RetryPolicy, actor

#: The environment variable naming the file the worker's spans go to (one JSON object a line).
SPANS_FILE = "TRACED_SPANS_FILE"


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """What the test reads of one span: ids as W3C hex, kind, parent, links, attributes."""
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": format_trace_id(context.trace_id),
        "span_id": format_span_id(context.span_id),
        "parent_span_id": None if span.parent is None else format_span_id(span.parent.span_id),
        "links": [
            [format_trace_id(link.context.trace_id), format_span_id(link.context.span_id)]
            for link in span.links
        ],
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
    }


class JsonLinesExporter(SpanExporter):
    """Appends each batch of spans to a file."""

    def __init__(self, path: str) -> None:
        self._path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self._path, "a", encoding="utf-8") as out:
            for span in spans:
                out.write(json.dumps(span_record(span)) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


_path = os.environ.get(SPANS_FILE)
if _path:
    _provider = TracerProvider()
    _provider.add_span_processor(BatchSpanProcessor(JsonLinesExporter(_path)))
    trace.set_tracer_provider(_provider)


class Step(BaseModel):
    n: int


@actor
async def follow_up(payload: Step) -> int:
    return payload.n


@actor
async def first(payload: Step, ctx: JobContext[Step]) -> int:
    """Enqueues a follow-up from inside its attempt, on a client of its own (TASKQ_* settings)."""
    async with JobsClient.connect() as client:
        await client.enqueue(follow_up, {"n": payload.n + 1})
    return payload.n


@actor(retry=RetryPolicy(kind="non_retryable"))
async def refuse(payload: Step) -> None:
    raise PermissionError(f"step {payload.n} is not allowed")


registry = [first, follow_up, refuse]
