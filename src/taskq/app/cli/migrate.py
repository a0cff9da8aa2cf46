"""``taskq migrate up|down|status``: create, upgrade, revert and inspect the schema."""

from __future__ import annotations

from typing import Annotated

import typer

from taskq.app import composition
from taskq.app.cli.support import (
    DsnOption,
    SchemaOption,
    fail,
    migrate_target,
    run_async,
)

migrate_app = typer.Typer(
    help="Create, upgrade, revert and inspect the TaskQ schema.", no_args_is_help=True
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
    applied = run_async(composition.migrate_up(dsn=dsn, schema_name=schema, target=target))
    for migration in applied:
        typer.echo(f"applied {migration.label}")
    if not applied:
        typer.echo(f"schema {schema} is up to date: nothing to apply")


@migrate_app.command("down")
def down(
    to: Annotated[
        int | None,
        typer.Option("--to", min=0, help="Revert every migration newer than this (0: all)."),
    ] = None,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Revert migrations, newest first (default: only the latest)."""
    dsn, schema = migrate_target(dsn, schema)
    typer.echo(composition.describe_target(dsn, schema))
    reverted = run_async(composition.migrate_down(dsn=dsn, schema_name=schema, to=to))
    for migration in reverted:
        typer.echo(f"reverted {migration.label}")
    if not reverted:
        typer.echo(f"schema {schema}: nothing to revert")


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
    if report.problems:
        fail(report.problems)


__all__ = ["migrate_app"]
