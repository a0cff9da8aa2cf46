"""The ``taskq`` command line: one Typer app, one sub-app per command group.

Each command group lives in its own module of this package and is added here;
``python -m taskq.app.cli`` runs it (see ``__main__``).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import NoReturn

import typer

from taskq.app.cli.actor_config import actor_config_app
from taskq.app.cli.demo import demo_command
from taskq.app.cli.jobs import jobs_app
from taskq.app.cli.migrate import migrate_app
from taskq.app.cli.queues import queues_app
from taskq.app.cli.worker import worker_command
from taskq.app.cli.workers import workers_app

app = typer.Typer(
    name="taskq",
    help="TaskQ: Postgres-backed background jobs.",
    no_args_is_help=True,
    add_completion=False,
    # Expected failures print one line (see cli.support); anything else is a bug and
    # should show a plain traceback, not a pretty one that hides the frames.
    pretty_exceptions_enable=False,
)
app.command("demo")(demo_command)
app.add_typer(migrate_app, name="migrate")
app.command("worker")(worker_command)
app.add_typer(jobs_app, name="jobs")
app.add_typer(workers_app, name="workers")
app.add_typer(queues_app, name="queues")
app.add_typer(actor_config_app, name="actor-config")


def _click_exceptions() -> ModuleType:
    # Recent typer vendors click as typer._click; older ones use click itself.
    try:
        return importlib.import_module("typer._click.exceptions")
    except ImportError:
        return importlib.import_module("click.exceptions")


def main(args: list[str] | None = None) -> NoReturn:
    """Console-script entry point (``taskq``).

    A usage error (unknown option or command, bad flag value) prints one
    ``taskq: ...`` line and exits 1, like a bad setting: exit 2 is the
    watchdog's, so a supervisor can tell a typo from a wedged worker.
    """
    errors = _click_exceptions()
    try:
        code = app(args=args, standalone_mode=False)
    except errors.NoArgsIsHelpError:
        sys.exit(0)  # the help was printed while the error was made
    except errors.UsageError as exc:
        names: list[str] = []
        ctx = exc.ctx
        while ctx is not None and ctx.parent is not None:  # the sub-command, without argv[0]
            names.insert(0, str(ctx.info_name))
            ctx = ctx.parent
        where = "".join(f"{name} " for name in names).rstrip()
        message = " ".join(exc.format_message().split())
        typer.echo(f"taskq: {where + ': ' if where else ''}{message}", err=True)
        sys.exit(1)
    except typer.Abort:
        typer.echo("taskq: aborted", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
