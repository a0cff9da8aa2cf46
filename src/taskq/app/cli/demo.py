"""``taskq demo``: watch a real worker process a few hundred sample jobs.

Exit codes: 0 the demo ran as designed (its planned failures included),
1 it could not run or did not end as designed (one line on stderr says why),
130 interrupted.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from taskq.app.cli.support import fail
from taskq.domain.errors import TaskQError


class Driver(StrEnum):
    asyncpg = "asyncpg"
    psycopg = "psycopg"


def demo_command(
    jobs: Annotated[
        int,
        typer.Option("--jobs", "-n", min=1, max=10_000, help="How many sample jobs to enqueue."),
    ] = 300,
    driver: Annotated[
        Driver,
        typer.Option(
            "--driver",
            envvar="TASKQ_DRIVER",
            case_sensitive=False,
            help="The Postgres driver for the client and the worker.",
        ),
    ] = Driver.asyncpg,
    dsn: Annotated[
        str | None,
        typer.Option(
            "--dsn",
            envvar="TASKQ_PG_DSN",
            help="Postgres to run on (default: TASKQ_PG_DSN; when unset, a temporary "
            "embedded Postgres).",
            show_default=False,
        ),
    ] = None,
    schema: Annotated[
        str,
        typer.Option(
            "--schema",
            help="The demo's own schema (must start with taskq_demo; dropped at the end).",
        ),
    ] = "taskq_demo",
    keep: Annotated[
        bool,
        typer.Option(
            "--keep", help="Keep the schema and its jobs afterwards (with a DSN) to look around."
        ),
    ] = False,
    max_concurrency: Annotated[
        int, typer.Option("--max-concurrency", min=1, max=256, help="Jobs the worker runs at once.")
    ] = 16,
) -> None:
    """See TaskQ work: enqueue sample jobs, run a real worker until idle, print a summary.

    Some jobs succeed, some fail and are retried with backoff, a few fail for
    good (by design), some are scheduled seconds ahead. Without TASKQ_PG_DSN the
    demo starts a temporary embedded Postgres (the embedded extra), deleted at
    the end.

    Exit codes: 0 it ran as designed (the planned failures included), 1 it could
    not run or did not end as designed (stderr says why), 130 interrupted.
    """
    # Imported here so `taskq --help` stays fast and loads no driver.
    from taskq.app.demo import DemoOptions, run_demo

    options = DemoOptions(
        jobs=jobs,
        driver=driver.value,
        dsn=dsn or None,
        schema=schema,
        keep=keep,
        max_concurrency=max_concurrency,
    )
    try:
        outcome = run_demo(options)
    except TaskQError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        typer.echo("taskq: demo interrupted", err=True)
        raise typer.Exit(130) from None
    if outcome.problem is not None:
        typer.echo("taskq: " + " ".join(outcome.problem.split()), err=True)
    raise typer.Exit(outcome.exit_code)


__all__ = ["demo_command"]
