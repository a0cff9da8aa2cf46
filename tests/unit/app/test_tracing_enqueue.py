"""PRODUCER spans of JobsClient enqueues on the memory adapter (the SDK's in-memory exporter)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from textwrap import dedent

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    StatusCode,
    TraceFlags,
    format_span_id,
    format_trace_id,
)
from pydantic import BaseModel
from tests.spans import SpanRecorder, attributes, ids_of, recording

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.client import JobsClient
from taskq.domain.errors import MaxPendingExceeded


class Order(BaseModel):
    order_id: int


@actor(queue="billing")
async def bill(payload: Order) -> None: ...


@actor(max_pending=1)
async def limited(payload: Order) -> None: ...


CALLER_TRACE = 0x0AF7651916CD43DD8448EB211C80319C
CALLER_SPAN = 0xB7AD6B7169203331


@pytest.fixture
def spans() -> Iterator[SpanRecorder]:
    with recording() as recorder:
        yield recorder


@pytest.fixture
def store() -> MemoryQueueStore:
    return MemoryBackend(clock=FakeClock()).store()


@pytest.fixture
async def client(store: MemoryQueueStore, spans: SpanRecorder) -> AsyncIterator[JobsClient]:
    async with JobsClient(store, tracer_provider=spans.provider) as traced:
        yield traced


def _remote(sampled: bool = True) -> NonRecordingSpan:
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    return NonRecordingSpan(SpanContext(CALLER_TRACE, CALLER_SPAN, True, flags))


async def test_enqueue_runs_in_a_producer_span_whose_context_the_job_stores(
    client: JobsClient, store: MemoryQueueStore, spans: SpanRecorder
) -> None:
    """One enqueue is one PRODUCER span 'enqueue {queue}' with the messaging attributes, and
    the job row holds that span's trace_id/span_id."""
    handle = await client.enqueue(bill, {"order_id": 1})
    (span,) = spans.finished()
    assert span.name == "enqueue billing"
    assert span.kind is SpanKind.PRODUCER
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "taskq"
    assert attributes(span) == {
        "messaging.system": "taskq",
        "messaging.operation.type": "send",
        "messaging.operation.name": "enqueue",
        "messaging.destination.name": "billing",
        "messaging.taskq.actor": "bill",
        "messaging.message.id": str(handle.job_id),
    }
    assert span.status.status_code is StatusCode.UNSET
    stored = await store.get(handle.job_id)
    assert stored is not None
    assert (stored.trace_id, stored.span_id) == ids_of(span)


async def test_the_producer_span_is_a_child_of_the_callers_span(
    client: JobsClient, spans: SpanRecorder
) -> None:
    """An enqueue inside the application's span continues its trace."""
    tracer = spans.provider.get_tracer("app")
    with tracer.start_as_current_span("handle request") as request:
        await client.enqueue(bill, {"order_id": 1})
    producer, outer = spans.finished()
    assert producer.parent is not None
    assert producer.parent.span_id == request.get_span_context().span_id
    assert producer.context.trace_id == outer.context.trace_id


async def test_a_batch_is_one_span_and_every_job_stores_its_context(
    client: JobsClient, store: MemoryQueueStore, spans: SpanRecorder
) -> None:
    """enqueue_many makes one PRODUCER span with the batch size, no per-job message id, and
    each job of the batch stores that span's context."""
    handles = await client.enqueue_many(bill, [{"order_id": n} for n in range(3)])
    (span,) = spans.finished()
    assert span.name == "enqueue billing"
    assert span.kind is SpanKind.PRODUCER
    assert attributes(span)["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in attributes(span)
    for handle in handles:
        stored = await store.get(handle.job_id)
        assert stored is not None
        assert (stored.trace_id, stored.span_id) == ids_of(span)


async def test_ids_the_caller_passes_are_stored_as_given_and_linked(
    client: JobsClient, store: MemoryQueueStore, spans: SpanRecorder
) -> None:
    """A custom creation context is kept unmodified; the PRODUCER span links to it."""
    trace_id, span_id = format_trace_id(CALLER_TRACE), format_span_id(CALLER_SPAN)
    single = await client.enqueue(bill, {"order_id": 1}, trace_id=trace_id, span_id=span_id)
    [batched] = await client.enqueue_many(
        bill, [{"order_id": 2}], trace_id=trace_id, span_id=span_id
    )
    for handle, span in zip((single, batched), spans.finished(), strict=True):
        stored = await store.get(handle.job_id)
        assert stored is not None
        assert (stored.trace_id, stored.span_id) == (trace_id, span_id)
        [link] = span.links
        assert (link.context.trace_id, link.context.span_id) == (CALLER_TRACE, CALLER_SPAN)


async def test_a_refused_enqueue_ends_its_span_as_an_error(
    client: JobsClient, spans: SpanRecorder
) -> None:
    """MaxPendingExceeded reaches the caller and its span: status ERROR, error.type, and the
    exception event."""
    await client.enqueue(limited, {"order_id": 1})
    with pytest.raises(MaxPendingExceeded):
        await client.enqueue(limited, {"order_id": 2})
    refused = spans.finished()[-1]
    assert refused.status.status_code is StatusCode.ERROR
    assert attributes(refused)["error.type"] == "MaxPendingExceeded"
    [event] = refused.events
    assert event.name == "exception"
    assert str(dict(event.attributes or {})["exception.type"]).endswith("MaxPendingExceeded")


async def test_an_unsampled_producer_span_stores_no_context(store: MemoryQueueStore) -> None:
    """A trace the application's sampler dropped is not continued by the worker's spans."""
    with recording(ALWAYS_OFF) as spans:
        async with JobsClient(store, tracer_provider=spans.provider) as client:
            handle = await client.enqueue(bill, {"order_id": 1})
        assert spans.finished() == []
    stored = await store.get(handle.job_id)
    assert stored is not None
    assert (stored.trace_id, stored.span_id) == (None, None)


async def test_otel_disabled_makes_no_span_and_stores_no_context(
    store: MemoryQueueStore, spans: SpanRecorder
) -> None:
    """otel_enabled=False (TASKQ_OTEL_ENABLED): no span even with an SDK provider, and no
    context from the caller's span; ids passed explicitly are still stored."""
    async with JobsClient(store, otel_enabled=False, tracer_provider=spans.provider) as client:
        with trace.use_span(_remote()):
            plain = await client.enqueue(bill, {"order_id": 1})
            [batched] = await client.enqueue_many(bill, [{"order_id": 2}])
            given = await client.enqueue(bill, {"order_id": 3}, trace_id="t", span_id="s")
    assert spans.finished() == []
    for handle, ids in ((plain, (None, None)), (batched, (None, None)), (given, ("t", "s"))):
        stored = await store.get(handle.job_id)
        assert stored is not None
        assert (stored.trace_id, stored.span_id) == ids


async def test_without_an_sdk_the_callers_sampled_context_is_passed_on(
    store: MemoryQueueStore,
) -> None:
    """With no SDK configured (the API's proxy provider) no span is made, but a job
    enqueued inside a propagated, sampled span context stores it; an unsampled one not."""
    async with JobsClient(store, tracer_provider=trace.ProxyTracerProvider()) as client:
        with trace.use_span(_remote()):
            single = await client.enqueue(bill, {"order_id": 1})
            [batched] = await client.enqueue_many(bill, [{"order_id": 2}])
        with trace.use_span(_remote(sampled=False)):
            dropped = await client.enqueue(bill, {"order_id": 3})
        outside = await client.enqueue(bill, {"order_id": 4})
    caller = (format_trace_id(CALLER_TRACE), format_span_id(CALLER_SPAN))
    for handle, ids in (
        (single, caller),
        (batched, caller),
        (dropped, (None, None)),
        (outside, (None, None)),
    ):
        stored = await store.get(handle.job_id)
        assert stored is not None
        assert (stored.trace_id, stored.span_id) == ids


#: A client built before the application configures its SDK, then an enqueue after.
_LATE_SDK = dedent(
    """
    import asyncio, json, time
    from pydantic import BaseModel
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from taskq import JobsClient, actor
    from taskq.adapters.memory import FakeClock, MemoryBackend
    from taskq.app.observability.tracing import LOOK_AGAIN_EVERY

    class Item(BaseModel):
        n: int

    @actor
    async def work(payload: Item) -> None: ...

    async def main() -> None:
        store = MemoryBackend(clock=FakeClock()).store()
        async with JobsClient(store) as client:
            before = await client.enqueue(work, {"n": 1})
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            time.sleep(LOOK_AGAIN_EVERY)
            after = await client.enqueue(work, {"n": 2})
            rows = [await store.get(h.job_id) for h in (before, after)]
        print(json.dumps({
            "spans": [s.name for s in exporter.get_finished_spans()],
            "stored": [r.span_id is not None for r in rows],
        }))

    asyncio.run(main())
    """
)


def test_an_sdk_configured_after_the_client_is_used_from_then_on() -> None:
    """The global provider is looked up lazily: before an SDK is set nothing is made, after
    it (within LOOK_AGAIN_EVERY) the enqueue has its span and the job its context."""
    done = subprocess.run(
        [sys.executable, "-c", _LATE_SDK], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"spans": ["enqueue default"], "stored": [False, True]}
