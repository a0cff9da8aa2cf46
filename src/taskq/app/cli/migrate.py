"""``taskq migrate up|down|status``: create, upgrade, revert and inspect the schema."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Final

import typer

from taskq.app import composition
from taskq.app.cli.support import (
    DsnOption,
    SchemaOption,
    fail,
    migrate_target,
    run_async,
)
from taskq.domain.errors import TaskQError

if TYPE_CHECKING:
    from taskq.app.composition import Migration

#: ``migrate down`` refused to drop the tables holding jobs without ``--yes``.
EXIT_NEEDS_YES: Final = 8

migrate_app = typer.Typer(
    help="Create, upgrade, revert and inspect the TaskQ schema.", no_args_is_help=True
)


def _report(verb: str, migrations: Sequence[Migration], nothing: str) -> None:
    """One line per migration ``up`` applied or ``down`` reverted, or ``nothing``."""
    for migration in migrations:
        typer.echo(f"{verb} {migration.label}")
    if not migrations:
        typer.echo(nothing)


def _warn_newer(schema: str, newer: Sequence[str]) -> None:
    """Name the migrations a newer TaskQ applied: left alone, so a rollback keeps working."""
    if newer:
        typer.echo(
            f"taskq: warning: schema {schema} has migration(s) {', '.join(newer)} applied by "
            "a newer TaskQ; this one leaves them as they are (upgrade TaskQ to manage them)",
            err=True,
        )


@migrate_app.command("up")
def up(
    target: Annotated[
        int | None,
        typer.Option("--target", min=1, help="Stop after this version (default: the latest)."),
    ] = None,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Apply pending migrations. Safe to repeat and to run from several processes at once."""
    dsn, schema = migrate_target(dsn, schema)
    typer.echo(composition.describe_target(dsn, schema))
    run = run_async(composition.upgrade_schema(dsn=dsn, schema_name=schema, target=target))
    _report("applied", run.applied, f"schema {schema} is up to date: nothing to apply")
    _warn_newer(schema, run.newer)


@migrate_app.command("down")
def down(
    to: Annotated[
        int | None,
        typer.Option("--to", min=0, help="Revert every migration newer than this (0: all)."),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes", help="Confirm a revert that drops the tables holding jobs (0001_jobs)."
        ),
    ] = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Revert migrations, newest first (default: only the latest)."""
    dsn, schema = migrate_target(dsn, schema)
    typer.echo(composition.describe_target(dsn, schema))
    try:
        reverted = asyncio.run(
            composition.migrate_down(dsn=dsn, schema_name=schema, to=to, drop_job_tables=yes)
        )
    except composition.JobTablesWouldBeDropped as exc:
        fail(f"{exc}; nothing was reverted: pass --yes to do it", code=EXIT_NEEDS_YES)
    except TaskQError as exc:
        fail(str(exc))
    _report("reverted", reverted, f"schema {schema}: nothing to revert")


@migrate_app.command("status")
def status(dsn: DsnOption = None, schema: SchemaOption = None) -> None:
    """List applied and pending migrations. Exits 1 when an applied file changed."""
    dsn, schema = migrate_target(dsn, schema)
    typer.echo(composition.describe_target(dsn, schema))
    report = run_async(composition.migrate_status(dsn=dsn, schema_name=schema))
    table = [("VERSION", "NAME", "STATE", "APPLIED AT")]
    for row in report.rows:
        applied_at = (
            row.applied_at.isoformat(sep=" ", timespec="seconds") if row.applied_at else "-"
        )
        table.append((f"{row.version:04d}", row.name, row.state.value, applied_at))
    widths = [max(len(line[i]) for line in table) for i in range(3)]
    for line in table:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        typer.echo("  ".join([*cells, line[3]]))
    _warn_newer(schema, report.newer)
    if report.problems:
        fail(report.problems)


__all__ = ["EXIT_NEEDS_YES", "migrate_app"]
