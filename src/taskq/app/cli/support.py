"""What every ``taskq`` sub-command shares: common options and one-line failures.

An expected failure (any ``TaskQError``: bad settings, unreachable database,
refused migration) prints one line ``taskq: <message>`` to stderr and exits
1, with no traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from taskq.domain.errors import TaskQError

T = TypeVar("T")


def command_group(help: str) -> typer.Typer:
    """A sub-command group: its help when called bare, no shell-completion options."""
    return typer.Typer(help=help, no_args_is_help=True, add_completion=False)


JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON (stable field names) instead of a table.")
]
DsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        help="Postgres DSN (default: TASKQ_PG_DSN_DIRECT, else TASKQ_PG_DSN, from the "
        "environment or .env, as the worker reads them).",
        show_default=False,
    ),
]
AppDirOption = Annotated[
    str,
    typer.Option(
        "--app-dir",
        help="Import --actors from this directory first (default: the working directory).",
    ),
]
SchemaOption = Annotated[
    str | None,
    typer.Option(
        "--schema",
        help="Schema holding TaskQ's tables (default: TASKQ_SCHEMA_NAME, else taskq).",
        show_default=False,
    ),
]


def fail(message: str, *, code: int = 1) -> NoReturn:
    """Print ``taskq: <message>`` as one line on stderr and exit ``code`` (1 unless a
    command documents another)."""
    typer.echo("taskq: " + " ".join(message.split()), err=True)
    raise typer.Exit(code)


def migrate_target(dsn: str | None, schema: str | None) -> tuple[str, str]:
    """The DSN and schema ``taskq migrate`` works on, resolved exactly as the worker does.

    ``TASKQ_*`` from the environment and ``.env`` (the worker's loader, so bad
    values are refused alike), then the flags, which win. Fails with one line.
    """
    from taskq.app.settings import MigrateSettings, check_pg_dsn, missing_pg_dsn
    from taskq.domain.settings_rules import validate_identifier

    overrides: dict[str, Any] = {"_env_file": ".env"}  # flags win over environment and .env
    try:
        if dsn is not None:
            overrides["pg_dsn_direct"] = check_pg_dsn(dsn)
    except ValueError as exc:
        fail(f"--dsn: {exc}")
    try:
        if schema is not None:
            overrides["schema_name"] = validate_identifier(schema, what="--schema")
        settings = MigrateSettings(**overrides)
    except TaskQError as exc:
        fail(str(exc))
    if not settings.pg_dsn_direct:
        fail(str(missing_pg_dsn(flag="--dsn")))
    return settings.pg_dsn_direct, settings.schema_name


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion; a ``TaskQError`` becomes a one-line failure."""
    try:
        return asyncio.run(coro)
    except TaskQError as exc:
        fail(str(exc))


__all__ = [
    "AppDirOption",
    "DsnOption",
    "JsonOption",
    "SchemaOption",
    "command_group",
    "fail",
    "migrate_target",
    "run_async",
]
