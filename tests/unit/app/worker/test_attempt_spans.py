"""CONSUMER spans of attempts on the memory adapter with a fake clock (the SDK's in-memory
exporter): parent and link, attributes, outcomes, errors, the actor's current span."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel
from tests.spans import SpanRecorder, attributes, recording
from tests.unit.app.worker.harness import WorkerRun, job, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.app.actors import ActorRef, actor
from taskq.app.client import JobsClient
from taskq.app.context import JobContext
from taskq.domain.job import NewJob
from taskq.domain.outcomes import Snooze
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus


class Item(BaseModel):
    n: int = 0


#: What the actors saw of their span: (current span's ids, ctx.span's ids or None).
SEEN: list[tuple[tuple[int, int], tuple[int, int] | None]] = []
#: A client the actors enqueue follow-ups with (set by the test).
FOLLOW_UPS: list[JobsClient] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    SEEN.clear()
    FOLLOW_UPS.clear()


@pytest.fixture
def spans() -> Iterator[SpanRecorder]:
    with recording() as recorder:
        yield recorder


def _see(ctx: JobContext[Any]) -> None:
    current = trace.get_current_span().get_span_context()
    own = None if ctx.span is None else ctx.span.get_span_context()
    SEEN.append(
        ((current.trace_id, current.span_id), None if own is None else (own.trace_id, own.span_id))
    )


@actor
async def ok(payload: Item, ctx: JobContext[Item]) -> int:
    _see(ctx)
    if FOLLOW_UPS and payload.n == 1:
        await FOLLOW_UPS[0].enqueue(ok, {"n": payload.n + 1}, queue="follow-ups")
    return payload.n


@actor
def ok_sync(payload: Item, ctx: JobContext[Item]) -> int:
    _see(ctx)
    return payload.n


@actor(retry=RetryPolicy(max_attempts=2, backoff="fixed", base=timedelta(seconds=1), jitter=0))
async def broken(payload: Item) -> None:
    raise ValueError(f"bad item {payload.n}")


@actor
async def sleepy(payload: Item) -> None:
    raise Snooze(timedelta(seconds=30))


@actor(timeout=timedelta(seconds=5), retry=RetryPolicy(max_attempts=1))
async def slow(payload: Item, ctx: JobContext[Item]) -> None:
    await ctx.cancel_event.wait()


@actor
async def waits(payload: Item, ctx: JobContext[Item]) -> None:
    await ctx.cancel_event.wait()


REFS: Sequence[ActorRef[Any, Any]] = (ok, ok_sync, broken, sleepy, slow, waits)


async def _worker(
    clock: FakeClock, backend: MemoryBackend, spans: SpanRecorder, **settings: Any
) -> WorkerRun:
    run = WorkerRun(
        backend,
        clock,
        {ref.name: ref for ref in REFS},
        make_settings(**{"queues": ["default", "follow-ups"]} | settings),
        tracer_provider=spans.provider,
    )
    await run.start()
    return run


def _consumers(spans: SpanRecorder) -> list[ReadableSpan]:
    return [span for span in spans.finished() if span.kind is SpanKind.CONSUMER]


def _producer(spans: SpanRecorder) -> ReadableSpan:
    [producer] = [span for span in spans.finished() if span.kind is SpanKind.PRODUCER]
    return producer


async def test_an_attempt_is_a_consumer_span_child_of_and_linked_to_the_producer_span(
    clock: FakeClock, backend: MemoryBackend, spans: SpanRecorder
) -> None:
    """'process {queue}' is a CONSUMER span whose parent is the enqueue's PRODUCER span (one
    trace), linked to it as well, with the messaging attributes, actor, attempt, outcome
    and TASKQ_WORKER_GROUP as the consumer group."""
    client = JobsClient(backend.store(), clock=clock, tracer_provider=spans.provider)
    handle = await client.enqueue(ok, {"n": 7})
    run = await _worker(clock, backend, spans, worker_group="billing-workers")
    await run.advance(1)
    assert (await job(run.store, handle.job_id)).status is JobStatus.SUCCEEDED
    producer = _producer(spans)
    [consumer] = _consumers(spans)
    assert consumer.name == "process default"
    assert consumer.parent is not None
    assert (consumer.parent.trace_id, consumer.parent.span_id) == (
        producer.context.trace_id,
        producer.context.span_id,
    )
    assert consumer.context.trace_id == producer.context.trace_id
    [link] = consumer.links
    assert (link.context.trace_id, link.context.span_id) == (
        producer.context.trace_id,
        producer.context.span_id,
    )
    assert attributes(consumer) == {
        "messaging.system": "taskq",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "default",
        "messaging.message.id": str(handle.job_id),
        "messaging.consumer.group.name": "billing-workers",
        "messaging.client.id": run.worker.worker_id,
        "messaging.taskq.actor": "ok",
        "messaging.taskq.job.attempt": 1,
        "messaging.taskq.job.outcome": "succeeded",
    }
    assert consumer.status.status_code is StatusCode.UNSET
    assert consumer.events == ()
    assert await run.stop() == 0


async def test_a_worker_run_inside_a_span_links_that_span_from_each_attempt(
    clock: FakeClock, backend: MemoryBackend, spans: SpanRecorder
) -> None:
    """A worker started in an application's span keeps the enqueue's span as the attempt's
    parent and adds the ambient span as a second link, as the conventions ask."""
    client = JobsClient(backend.store(), clock=clock, tracer_provider=spans.provider)
    await client.enqueue(ok, {"n": 2})
    with spans.provider.get_tracer("app").start_as_current_span("app main") as main:
        run = await _worker(clock, backend, spans)
    await run.advance(1)
    assert await run.stop() == 0
    producer = _producer(spans)
    [consumer] = _consumers(spans)
    assert consumer.parent is not None
    assert consumer.parent.span_id == producer.context.span_id
    assert [link.context.span_id for link in consumer.links] == [
        producer.context.span_id,
        main.get_span_context().span_id,
    ]


async def test_the_actor_runs_with_its_attempt_span_current(
    clock: FakeClock, backend: MemoryBackend, spans: SpanRecorder
) -> None:
    """Inside the actor (async, and sync in its thread) the attempt's span is current and is
    ctx.span; a follow-up it enqueues is a child of it, and that job's attempt continues the
    same trace."""
    client = JobsClient(backend.store(), clock=clock, tracer_provider=spans.provider)
    FOLLOW_UPS.append(client)
    await client.enqueue(ok, {"n": 1})
    run = await _worker(clock, backend, spans)
    await run.advance(1)
    FOLLOW_UPS.clear()
    await client.enqueue(ok_sync, {"n": 3})
    await run.advance(1)
    assert await run.stop() == 0
    first, follow_up, sync = _consumers(spans)
    assert [span.name for span in (first, follow_up, sync)] == [
        "process default",
        "process follow-ups",
        "process default",
    ]
    expected = [
        ((span.context.trace_id, span.context.span_id),) * 2 for span in (first, follow_up, sync)
    ]
    assert expected == SEEN
    [nested] = spans.named("enqueue follow-ups")
    assert nested.parent is not None
    assert nested.parent.span_id == first.context.span_id
    assert follow_up.parent is not None
    assert follow_up.parent.span_id == nested.context.span_id
    assert follow_up.context.trace_id == first.context.trace_id


async def test_a_failing_attempt_records_its_exception_and_ends_in_error(
    clock: FakeClock, backend: MemoryBackend, spans: SpanRecorder
) -> None:
    """Each attempt that raised is status ERROR with error.type and an 'exception' event
    (class, message, traceback); outcome 'retried', then 'failed' on the last attempt; both
    attempts are children of the one PRODUCER span."""
    client = JobsClient(backend.store(), clock=clock, tracer_provider=spans.provider)
    handle = await client.enqueue(broken, {"n": 4})
    run = await _worker(clock, backend, spans)
    await run.advance(3)
    assert (await job(run.store, handle.job_id)).status is JobStatus.FAILED
    assert await run.stop() == 0
    producer = _producer(spans)
    retried, failed = _consumers(spans)
    for span, attempt, outcome in ((retried, 1, "retried"), (failed, 2, "failed")):
        values = attributes(span)
        assert values["messaging.taskq.job.attempt"] == attempt
        assert values["messaging.taskq.job.outcome"] == outcome
        assert values["error.type"] == "ValueError"
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "ValueError: bad item 4"
        [event] = span.events
        assert event.name == "exception"
        recorded = dict(event.attributes or {})
        assert recorded["exception.type"] == "ValueError"
        assert recorded["exception.message"] == "bad item 4"
        assert "in broken" in str(recorded["exception.stacktrace"])
        assert span.parent is not None
        assert span.parent.span_id == producer.context.span_id


async def test_outcomes_snoozed_timed_out_cancelled_and_interrupted(
    clock: FakeClock, backend: MemoryBackend, spans: SpanRecorder
) -> None:
    """A snooze is no error; a timeout is error.type AttemptTimeout (outcome as the policy
    decided: failed); a user's cancel is 'cancelled', no error; an attempt the shutdown
    stopped is 'interrupted' with error.type WorkerShutdown."""
    client = JobsClient(backend.store(), clock=clock, tracer_provider=spans.provider)
    snoozed = await client.enqueue(sleepy, {})
    timed = await client.enqueue(slow, {})
    cancelled = await client.enqueue(waits, {"n": 1})
    run = await _worker(clock, backend, spans, cancellation_grace_period=30.0)
    await run.advance(1)
    await client.cancel(cancelled.job_id)
    await run.advance(10)  # the heartbeat passes the cancel on; the timeout passes
    interrupted = await client.enqueue(waits, {"n": 2})
    await run.advance(1)
    assert await run.stop() == 0
    by_job = {attributes(span)["messaging.message.id"]: span for span in _consumers(spans)}
    expected = {
        snoozed.job_id: ("snoozed", None),
        timed.job_id: ("failed", "AttemptTimeout"),
        cancelled.job_id: ("cancelled", None),
        interrupted.job_id: ("interrupted", "WorkerShutdown"),
    }
    seen = {
        int(job_id): (
            attributes(span)["messaging.taskq.job.outcome"],
            attributes(span).get("error.type"),
        )
        for job_id, span in by_job.items()
    }
    assert seen == expected
    for job_id, (_, error) in expected.items():
        status = by_job[str(job_id)].status.status_code
        assert status is (StatusCode.UNSET if error is None else StatusCode.ERROR)


async def test_a_job_with_no_creation_context_starts_a_trace_of_its_own(
    clock: FakeClock, backend: MemoryBackend, spans: SpanRecorder
) -> None:
    """A job stored without ids (or with ids that are not W3C hex) gets a root CONSUMER span:
    no parent, no link."""
    store = backend.store()
    await store.enqueue(NewJob(actor="ok", payload={"n": 1}))
    await store.enqueue(NewJob(actor="ok", payload={"n": 2}, trace_id="order-7", span_id="x"))
    run = await _worker(clock, backend, spans)
    await run.advance(1)
    assert await run.stop() == 0
    consumers = _consumers(spans)
    assert len(consumers) == 2
    for span in consumers:
        assert (span.parent, span.links) == (None, ())


async def test_otel_disabled_makes_no_attempt_span(
    clock: FakeClock, backend: MemoryBackend, spans: SpanRecorder
) -> None:
    """TASKQ_OTEL_ENABLED=false: no span although an SDK provider is given, ctx.span is None
    and the actor's current span is the invalid one."""
    client = JobsClient(backend.store(), clock=clock, otel_enabled=False)
    await client.enqueue(ok, {"n": 1})
    run = await _worker(clock, backend, spans, otel_enabled=False)
    await run.advance(1)
    assert await run.stop() == 0
    assert spans.finished() == []
    assert SEEN == [((0, 0), None)]


async def test_without_an_sdk_the_worker_makes_no_span_and_the_actor_sees_none(
    clock: FakeClock, backend: MemoryBackend
) -> None:
    """With the API's proxy provider (no SDK configured) the attempt has no span: ctx.span is
    None, and the actor's current span is the invalid one."""
    client = JobsClient(backend.store(), clock=clock, tracer_provider=trace.ProxyTracerProvider())
    await client.enqueue(ok, {"n": 1})
    run = WorkerRun(
        backend, clock, {"ok": ok}, make_settings(), tracer_provider=trace.ProxyTracerProvider()
    )
    await run.start()
    await run.advance(1)
    assert await run.stop() == 0
    assert SEEN == [((0, 0), None)]
