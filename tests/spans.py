"""An OpenTelemetry SDK tracer provider whose finished spans a test reads (in memory)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.trace import format_span_id, format_trace_id


class SpanRecorder:
    """A tracer provider (``provider``) that keeps every span it ends, for the test."""

    def __init__(self, sampler: Sampler | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(sampler=sampler)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished(self) -> list[ReadableSpan]:
        """Every span ended so far, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.finished() if span.name == name]

    def shutdown(self) -> None:
        self.provider.shutdown()


@contextmanager
def recording(sampler: Sampler | None = None) -> Iterator[SpanRecorder]:
    recorder = SpanRecorder(sampler)
    try:
        yield recorder
    finally:
        recorder.shutdown()


def ids_of(span: ReadableSpan) -> tuple[str, str]:
    """``(trace_id, span_id)`` of ``span`` as W3C hex: what a job row stores."""
    context = span.get_span_context()
    assert context is not None
    return format_trace_id(context.trace_id), format_span_id(context.span_id)


def attributes(span: ReadableSpan) -> Mapping[str, Any]:
    return dict(span.attributes or {})
