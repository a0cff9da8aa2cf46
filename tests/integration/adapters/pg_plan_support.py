"""A large jobs table and EXPLAIN of every statement that reads it, for the plan tests.

The table looks like a busy queue between prunes: mostly finished rows, a
backlog of pending jobs, a few running ones, some scheduled. Each statement is
PREPAREd from its .sql file and EXPLAINed with fixed literals, as a custom and
as a generic plan (the one a statement cache may switch to).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import asyncpg

from taskq.adapters.postgres.schema import Schema
from taskq.adapters.postgres.sql_loader import numbered_queries

FINISHED: Final = 200_000
PENDING: Final = 20_000
RUNNING: Final = 400
SCHEDULED: Final = 5_000

#: The query families that read or write jobs (claim and finish included: they share indexes).
FAMILIES: Final = (
    "claim",
    "finish",
    "enqueue",
    "maintenance",
    "workers",
    "actor_config",
    "retention",
    "reads",
    "cancel",
)

#: Parameter literals by name, typed by the casts in the statements themselves.
LITERALS: Final[Mapping[str, str]] = {
    "now": "NULL",
    "actors": "'{a1,a2,a3}'",
    "queues": "'{q1}'",
    "queue": "'q1'",
    "limit": "16",
    "start_now": "4",
    "worker_id": "'w3'",
    "lease": "'30 seconds'",
    "job_id": "'{5,6,7}'",
    "fencing_token": "'{1,1,1}'",
    "started_ago": "'{1 second,1 second,1 second}'",
    "status": "'{succeeded,succeeded,succeeded}'",
    "result": "'{NULL,NULL,NULL}'",
    "error": "'{NULL,NULL,NULL}'",
    "error_class": "'{NULL,NULL,NULL}'",
    "result_ttl": "'{1 day,1 day,1 day}'",
    "finished_now": "'{NULL,NULL,NULL}'",
    "traceback": "'{NULL,NULL,NULL}'",
    "key_actor": "'{a1}'",
    "identity_key": "'{k1}'",
    "idempotency_key": "'{i1}'",
    "count_waiting": "true",
    "stale_after": "'1 minute'",
    "is_leader": "true",
    "lapse_job_id": "'{6}'",
    "lapse_fencing_token": "'{1}'",
    "retryable_actors": "'{a1}'",
    "retry_at": "now()",
    "last_error": "'x'",
    "statuses": "'{succeeded,failed}'",
    "retentions": "'{1 day,7 days}'",
    "batch_size": "1000",
    "archive_retention": "'30 days'",
}
#: Overrides where one name has another type in one statement.
OVERRIDES: Final[Mapping[str, Mapping[str, str]]] = {
    "finish.reschedule_job": {
        "job_id": "5",
        "fencing_token": "1",
        "started_ago": "'1 second'",
        "run_at": "NULL",
        "delay": "'1 second'",
        "refund_attempt": "false",
        "snooze": "false",
        "error": "NULL",
        "error_class": "NULL",
        "traceback": "NULL",
        "outcome": "'retry'",
    },
    "finish.escalate_cancel": {"job_id": "5", "fencing_token": "1"},
    "finish.interrupt_job": {
        "job_id": "5",
        "fencing_token": "1",
        "retryable": "true",
        "run_at": "now()",
        "error": "'x'",
        "error_class": "'WorkerShutdown'",
        "started_ago": "'1 second'",
    },
    "claim.mark_started": {},
    "enqueue.insert_job_keyed": {
        "lock_timeout": "NULL",
        "actor": "'a1'",
        "idempotency_key": "'i1'",
        "identity_key": "'k1'",
        "payload": "'{}'",
        "scheduled_at": "NULL",
        "priority": "0",
        "max_attempts": "NULL",
        "schedule_to_close": "NULL",
        "fairness_key": "NULL",
        "metadata": "'{}'",
        "tags": "NULL",
        "trace_id": "NULL",
        "span_id": "NULL",
        "attempt_timeout": "NULL",
        "channel": "'c'",
    },
    "workers.isolate_worker": {"error": "'x'", "error_class": "'HeartbeatLost'"},
    "reads.get_job": {"job_id": "5"},
    "reads.job_attempts": {"job_id": "5"},
    "cancel.request_cancel": {"job_id": "5", "lock_timeout": "NULL"},
}
#: Statements that read jobs by a condition other than the primary key.
STATEMENTS: Final = (
    "claim.claim_fifo",
    "claim.finish_and_claim",
    "claim.claim_mixed",
    "claim.mark_started",
    "claim.drain_unstarted",
    "finish.reschedule_job",
    "finish.escalate_cancel",
    "enqueue.insert_job_keyed",
    "enqueue.enqueue_lookup",
    "maintenance.promote_scheduled",
    "maintenance.reclaim_expired",
    "maintenance.fail_past_deadline",
    "workers.heartbeat",
    "workers.isolate_worker",
    "retention.prune_batch",
    "retention.expire_results",
    "reads.get_job",
    "reads.job_attempts",
    "reads.count_active",
    "reads.count_active_in",
    "reads.queue_depths",
    "reads.stranded_actors",
    "reads.stranded_actors_in",
    "cancel.request_cancel",
)


def _fill(schema: Schema, status: str, count: int) -> str:
    """INSERT of ``count`` jobs of ``status`` over 8 queues and 40 actors."""
    g = "g"
    cols = {  # scheduled_at, finished_at, result_expires_at, locked_by, lock_expires_at, deadline
        "succeeded": (
            "now() - interval '1 day'",
            f"now() - ({g} % 1000) * interval '1 minute'",
            f"now() + ({g} % 1000) * interval '1 minute'",
            "NULL",
            "NULL",
            "NULL",
        ),
        "pending": (
            f"now() - ({g} % 600) * interval '1 second'",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            f"CASE WHEN {g} % 50 = 0 THEN now() + interval '1 day' END",
        ),
        "running": (
            "now() - interval '1 hour'",
            "NULL",
            "NULL",
            f"'w' || ({g} % 20)",
            f"now() + interval '30 seconds' - ({g} % 2) * interval '1 minute'",
            "NULL",
        ),
        "scheduled": (
            f"now() + ({g} % 1000) * interval '1 minute'",
            "NULL",
            "NULL",
            "NULL",
            "NULL",
            f"CASE WHEN {g} % 10 = 0 THEN now() + interval '1 day' END",
        ),
    }[status]
    return f"""
        INSERT INTO {schema.quoted}.jobs (
            queue, actor, status, scheduled_at, finished_at, result_expires_at, locked_by,
            lock_expires_at, schedule_to_close, identity_key, idempotency_key)
        SELECT 'q' || (g % 8), 'a' || (g % 40), '{status}', {", ".join(cols)},
               CASE WHEN g % 100 = 0 AND '{status}' <> 'succeeded' THEN '{status}' || g END,
               CASE WHEN g % 100 = 1 THEN '{status}' || g END
        FROM generate_series(1, {count}) AS g
    """


async def fill_jobs(conn: asyncpg.Connection, schema: Schema, *, analyze: bool = True) -> None:
    """The busy-queue table described above; ANALYZEd unless ``analyze`` is false."""
    t = schema.quoted
    for status, count in (
        ("succeeded", FINISHED),
        ("pending", PENDING),
        ("running", RUNNING),
        ("scheduled", SCHEDULED),
    ):
        await conn.execute(_fill(schema, status, count))
    await conn.execute(
        f"""INSERT INTO {t}.actor_config (actor, queue, max_concurrent, max_pending)
            SELECT 'a' || g, 'q' || (g % 8), CASE WHEN g < 3 THEN 4 END,
                   CASE WHEN g < 5 THEN 100000 END
            FROM generate_series(0, 29) AS g"""
    )
    if analyze:
        await conn.execute(f"ANALYZE {t}.jobs; ANALYZE {t}.actor_config")


@dataclass(frozen=True)
class Plan:
    """One EXPLAIN of a statement: its text (for messages) and its scans of jobs."""

    statement: str
    mode: str
    text: str
    scans: tuple[Scan, ...]


@dataclass(frozen=True)
class Scan:
    """A plan node that reads jobs or one of its indexes."""

    node: str
    index: str | None
    index_cond: str | None


def _scans(node: Mapping[str, Any]) -> list[Scan]:
    found = []
    index = node.get("Index Name")
    reads_jobs = node.get("Relation Name") == "jobs" or (index or "").startswith("jobs_")
    # Scans only (not the Update/Delete node); a bitmap heap scan's index is its child.
    if reads_jobs and "Scan" in node["Node Type"] and node["Node Type"] != "Bitmap Heap Scan":
        found.append(Scan(node["Node Type"], index, node.get("Index Cond")))
    for child in node.get("Plans", ()):
        found.extend(_scans(child))
    return found


async def explain(conn: asyncpg.Connection, schema: Schema, statement: str) -> tuple[Plan, Plan]:
    """(custom plan, generic plan) of ``family.name`` with the fixed literals."""
    family, name = statement.split(".")
    query = numbered_queries(family, schema)[name]
    values = {**LITERALS, **OVERRIDES.get(statement, {})}
    args = ", ".join(values[p] for p in query.params)
    execute = f"EXECUTE taskq_plan({args})" if args else "EXECUTE taskq_plan"
    plans = []
    await conn.execute(f"PREPARE taskq_plan AS {query.sql}")
    try:
        for mode in ("force_custom_plan", "force_generic_plan"):
            await conn.execute(f"SET plan_cache_mode = {mode}")
            text = "\n".join(row[0] for row in await conn.fetch(f"EXPLAIN {execute}"))
            tree = json.loads(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {execute}"))
            plans.append(Plan(statement, mode, text, tuple(_scans(tree[0]["Plan"]))))
    finally:
        await conn.execute("DEALLOCATE taskq_plan; RESET plan_cache_mode")
    return plans[0], plans[1]
