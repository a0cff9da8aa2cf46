"""``taskq jobs list|get|cancel|retry``: find a job, read its history, cancel or retry it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from taskq.app.cli.operator import operate
from taskq.app.cli.output import (
    iso,
    print_fields,
    print_json,
    print_table,
    text,
    when,
)
from taskq.app.cli.support import DsnOption, JsonOption, SchemaOption, command_group
from taskq.domain.errors import JobNotFound
from taskq.domain.job import AttemptRecord, Job
from taskq.domain.status import JobStatus
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import JOB_QUERY_LIMIT_MAX, JobQuery

jobs_app = command_group("List, inspect, cancel and retry jobs.")

JobIdArgument = Annotated[int, typer.Argument(metavar="ID", help="The job's id.")]

#: How much of a job's last error a table row shows (``get`` shows all of it).
ERROR_PREVIEW = 60


def job_json(job: Job) -> dict[str, Any]:
    """A job as ``--json`` prints it (field names documented in docs/cli.md)."""
    return {
        "id": job.id,
        "actor": job.actor,
        "queue": job.queue,
        "status": job.status.value,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "priority": job.priority,
        "created_at": iso(job.created_at),
        "scheduled_at": iso(job.scheduled_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "locked_by": job.locked_by,
        "lock_expires_at": iso(job.lock_expires_at),
        "cancel_requested_at": iso(job.cancel_requested_at),
        "last_error": job.last_error,
        "identity_key": job.identity_key,
        "idempotency_key": job.idempotency_key,
        "fairness_key": job.fairness_key,
        "tags": list(job.tags),
        "payload": job.payload,
        "metadata": job.metadata,
        "result": job.result,
        "trace_id": job.trace_id,
    }


def attempt_json(record: AttemptRecord) -> dict[str, Any]:
    return {
        "attempt": record.attempt,
        "outcome": record.outcome,
        "worker_id": record.worker_id,
        "started_at": iso(record.started_at),
        "finished_at": iso(record.finished_at),
        "error_class": record.error_class,
        "error": record.error,
        "traceback": record.traceback,
    }


def _attempts_of(job: Job) -> str:
    return f"{job.attempt}/{job.max_attempts}" if job.max_attempts else str(job.attempt)


def _preview(error: str | None) -> str:
    if error is None:
        return "-"
    line = " ".join(error.split())
    return line if len(line) <= ERROR_PREVIEW else line[: ERROR_PREVIEW - 1] + "…"


@jobs_app.command("list")
def list_jobs(
    status: Annotated[
        JobStatus | None,
        typer.Option("--status", help="Only jobs in this status.", show_default=False),
    ] = None,
    actor: Annotated[
        str | None, typer.Option("--actor", help="Only this actor's jobs.", show_default=False)
    ] = None,
    queue: Annotated[
        str | None, typer.Option("--queue", help="Only jobs on this queue.", show_default=False)
    ] = None,
    limit: Annotated[
        int,
        typer.Option("--limit", min=1, max=JOB_QUERY_LIMIT_MAX, help="At most this many jobs."),
    ] = 50,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """List jobs, newest first (finished jobs until the prune archives them)."""
    query = JobQuery(status=status, actor=actor, queue=queue, limit=limit)
    jobs = operate(dsn, schema, lambda store: store.list_jobs(query))
    if as_json:
        print_json([job_json(job) for job in jobs])
        return
    print_table(
        ("ID", "ACTOR", "QUEUE", "STATUS", "ATTEMPT", "DUE", "FINISHED", "LAST ERROR"),
        (
            (
                str(job.id),
                job.actor,
                job.queue,
                job.status.value,
                _attempts_of(job),
                when(job.scheduled_at),
                when(job.finished_at),
                _preview(job.last_error),
            )
            for job in jobs
        ),
        empty="no jobs match",
        keys=("ID", "ACTOR", "QUEUE", "STATUS"),
        optional=("DUE", "FINISHED"),
    )


async def _job_and_attempts(store: QueueStore, job_id: int) -> tuple[Job, list[AttemptRecord]]:
    job = await store.get(job_id)
    if job is None:
        raise JobNotFound(job_id)
    return job, await store.attempts(job_id)


@jobs_app.command("get")
def get_job(
    job_id: JobIdArgument,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Show one job with its attempt history, each failed attempt's traceback included."""
    job, attempts = operate(dsn, schema, lambda store: _job_and_attempts(store, job_id))
    if as_json:
        print_json({**job_json(job), "attempts": [attempt_json(a) for a in attempts]})
        return
    print_fields(
        [
            ("id", str(job.id)),
            ("actor", job.actor),
            ("queue", job.queue),
            ("status", job.status.value),
            ("attempt", _attempts_of(job)),
            ("priority", str(job.priority)),
            ("created", when(job.created_at)),
            ("due", when(job.scheduled_at)),
            ("started", when(job.started_at)),
            ("finished", when(job.finished_at)),
            ("worker", text(job.locked_by)),
            ("cancel requested", when(job.cancel_requested_at)),
            ("last error", text(job.last_error)),
        ]
    )
    typer.echo("")
    if not attempts:
        typer.echo("no attempt has ended yet")
        return
    print_table(
        ("ATTEMPT", "OUTCOME", "WORKER", "STARTED", "FINISHED", "ERROR"),
        (
            (
                str(a.attempt),
                a.outcome,
                text(a.worker_id),
                when(a.started_at),
                when(a.finished_at),
                # One line: a row per attempt (a pydantic error spans several lines).
                " ".join(": ".join(part for part in (a.error_class, a.error) if part).split())
                or "-",
            )
            for a in attempts
        ),
        empty="",
        keys=("ATTEMPT", "OUTCOME", "WORKER"),
        optional=("STARTED",),
    )
    for a in attempts:
        if a.traceback:
            typer.echo(f"\ntraceback of attempt {a.attempt} ({a.outcome}):")
            typer.echo(a.traceback.rstrip("\n"))


async def _cancel(store: QueueStore, job_id: int) -> tuple[bool, JobStatus]:
    """Whether the job had ended before the request (only to word the answer), and its
    status after it."""
    before = await store.get(job_id)
    ended = before is not None and before.status.is_terminal
    return ended, await store.request_cancel(job_id)


@jobs_app.command("cancel")
def cancel_job(
    job_id: JobIdArgument,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Cancel a waiting job now, or ask a running one to stop (its worker cancels it).

    A job that already ended is left as it was (exit 0, its status printed).
    """
    ended, status = operate(dsn, schema, lambda store: _cancel(store, job_id))
    if as_json:
        print_json({"id": job_id, "status": status.value})
    elif ended:
        typer.echo(f"job {job_id}: already ended {status.value}; nothing to cancel")
    elif status is JobStatus.CANCELLED:
        typer.echo(f"job {job_id}: cancelled")
    elif status is JobStatus.RUNNING:
        typer.echo(f"job {job_id}: running; cancel requested, its worker stops it")
    else:  # it ended between the read and the request
        typer.echo(f"job {job_id}: ended {status.value}")


@jobs_app.command("retry")
def retry_job(
    job_id: JobIdArgument,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Send a failed, cancelled, crashed or abandoned job back to pending, history kept.

    The job gets one more attempt. Any other status is refused, saying why (exit 1).
    """
    job = operate(dsn, schema, lambda store: store.retry_job(job_id))
    if as_json:
        print_json(job_json(job))
        return
    typer.echo(f"job {job.id}: pending again; its next attempt is attempt {job.attempt + 1}")


__all__ = ["attempt_json", "job_json", "jobs_app"]
