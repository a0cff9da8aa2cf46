"""One OpenTelemetry trace across two processes: enqueue here, run in a real ``taskq worker``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from tests.integration.client.pools import caller_pool
from tests.integration.worker.support import Database, WorkerSpawner
from tests.integration.worker.traced_actors_fixture import SPANS_FILE, first, refuse
from tests.spans import SpanRecorder, ids_of, recording

from taskq import JobsClient

pytestmark = pytest.mark.integration

REGISTRY = "tests.integration.worker.traced_actors_fixture:registry"


def _worker_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def _stored_ids(conn: asyncpg.Connection, schema: str, job_id: int) -> tuple[str, str]:
    row = await conn.fetchrow(f"SELECT trace_id, span_id FROM {schema}.jobs WHERE id = $1", job_id)
    assert row is not None
    return row["trace_id"], row["span_id"]


async def test_one_trace_spans_the_enqueue_here_and_the_attempt_in_a_worker_process(
    db: Database, conn: asyncpg.Connection, workers: WorkerSpawner, tmp_path: Path
) -> None:
    """A job enqueued here (alone, and inside the caller's own transaction) stores its
    PRODUCER span's context; the worker process's CONSUMER span is that span's child in the
    same trace, with the worker group; a follow-up the actor enqueues continues the trace;
    a failing attempt's span is an error; the SDK's batched spans are flushed at exit."""
    spans_file = tmp_path / "worker-spans.jsonl"
    with recording() as spans:
        async with JobsClient.connect(settings=db.settings(), tracer_provider=spans.provider) as (
            client
        ):
            alone = await client.enqueue(first, {"n": 1})
            refused = await client.enqueue(refuse, {"n": 9})
        async with caller_pool(db.driver, db.dsn) as pool:
            in_transaction = pool.client(db.schema, tracer_provider=spans.provider)
            async with pool.transaction() as caller_conn:
                joined = await in_transaction.enqueue(first, {"n": 5}, connection=caller_conn)
            await in_transaction.aclose()
        producers = _by_message_id(spans)

    env = db.worker_env(TASKQ_WORKER_GROUP="tracing-test", **{SPANS_FILE: str(spans_file)})
    proc = workers.start(env, "--until-idle", registry=REGISTRY)
    assert await proc.wait(within=90) == 3, proc.output_tail()  # 3: a job failed
    worker_spans = _worker_spans(spans_file)
    consumers = {
        int(s["attributes"]["messaging.message.id"]): s
        for s in worker_spans
        if s["kind"] == "CONSUMER"
    }
    assert len(consumers) == 5, worker_spans  # the three enqueued here, two follow-ups

    for handle in (alone, joined, refused):
        trace_id, span_id = producers[handle.job_id]
        assert await _stored_ids(conn, db.schema, handle.job_id) == (trace_id, span_id)
        consumer = consumers[handle.job_id]
        assert consumer["trace_id"] == trace_id
        assert consumer["parent_span_id"] == span_id
        assert consumer["links"] == [[trace_id, span_id]]
        assert consumer["name"] == "process default"
        assert consumer["attributes"]["messaging.consumer.group.name"] == "tracing-test"
        assert consumer["attributes"]["messaging.system"] == "taskq"

    assert consumers[alone.job_id]["attributes"]["messaging.taskq.job.outcome"] == "succeeded"
    assert consumers[alone.job_id]["status"] == "UNSET"
    assert consumers[refused.job_id]["attributes"]["messaging.taskq.job.outcome"] == "failed"
    assert consumers[refused.job_id]["attributes"]["error.type"] == "PermissionError"
    assert consumers[refused.job_id]["status"] == "ERROR"

    # Each `first` enqueued a follow-up inside its attempt: a PRODUCER span in the worker,
    # child of that attempt's span, whose job's attempt is its child: one trace throughout.
    nested = [s for s in worker_spans if s["kind"] == "PRODUCER"]
    assert len(nested) == 2
    for parent_handle in (alone, joined):
        parent = consumers[parent_handle.job_id]
        [producer] = [s for s in nested if s["parent_span_id"] == parent["span_id"]]
        assert producer["trace_id"] == parent["trace_id"]
        follow_up = consumers[int(producer["attributes"]["messaging.message.id"])]
        assert follow_up["attributes"]["messaging.taskq.actor"] == "follow_up"
        assert (follow_up["trace_id"], follow_up["parent_span_id"]) == (
            producer["trace_id"],
            producer["span_id"],
        )


def _by_message_id(spans: SpanRecorder) -> dict[int, tuple[str, str]]:
    """The test process's PRODUCER spans by the job id they enqueued: their W3C ids."""
    found = {}
    for span in spans.finished():
        job_id = (span.attributes or {}).get("messaging.message.id")
        assert isinstance(job_id, str)
        found[int(job_id)] = ids_of(span)
    return found
