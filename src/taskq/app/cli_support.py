"""What every ``taskq`` sub-command shares: common options and one-line failures.

An expected failure (any ``TaskQError``: bad settings, unreachable database,
refused migration) prints one line ``taskq: <message>`` to stderr and exits
1, with no traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Annotated, Any, Final, NoReturn, TypeVar

import typer

from taskq.domain.errors import TaskQError

T = TypeVar("T")

#: The DSN used when neither ``--dsn`` nor a DSN variable is set (the settings default).
DEFAULT_PG_DSN: Final = "postgresql://taskq:taskq@localhost:5432/taskq"
DEFAULT_SCHEMA: Final = "taskq"

DsnOption = Annotated[
    str,
    typer.Option(
        "--dsn",
        # Direct first: migrations hold a session advisory lock, which a
        # transaction-mode pooler would silently drop.
        envvar=["TASKQ_PG_DSN_DIRECT", "TASKQ_PG_DSN"],
        help="Postgres DSN (default: TASKQ_PG_DSN_DIRECT, else TASKQ_PG_DSN).",
        show_default=False,
    ),
]
SchemaOption = Annotated[
    str,
    typer.Option("--schema", envvar="TASKQ_SCHEMA_NAME", help="Schema holding TaskQ's tables."),
]


def fail(message: str) -> NoReturn:
    """Print ``taskq: <message>`` as one line on stderr and exit 1."""
    typer.echo("taskq: " + " ".join(message.split()), err=True)
    raise typer.Exit(1)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion; a ``TaskQError`` becomes a one-line failure."""
    try:
        return asyncio.run(coro)
    except TaskQError as exc:
        fail(str(exc))


__all__ = ["DEFAULT_PG_DSN", "DEFAULT_SCHEMA", "DsnOption", "SchemaOption", "fail", "run_async"]
