"""The benchmarks' no-op actor, in a worker process with an OpenTelemetry SDK configured.

``bench_tracing.py --drain`` loads it as ``--actors traced_noop_actors:registry`` for its
"SDK" mode: a ``TracerProvider`` whose ``BatchSpanProcessor`` hands every span to an
exporter that drops it, so the cost measured is TaskQ's spans and the SDK's, not an export.
"""

from __future__ import annotations

from collections.abc import Sequence

import noop_actors
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class DropSpans(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


_provider = TracerProvider()
_provider.add_span_processor(BatchSpanProcessor(DropSpans()))
trace.set_tracer_provider(_provider)

registry = noop_actors.registry
