"""The ``taskq`` command line: one Typer app, one sub-app per command group.

Each group lives in its own ``cli_<group>.py`` module and is added here.
"""

from __future__ import annotations

import typer

from taskq.app.cli_demo import demo_command
from taskq.app.cli_migrate import migrate_app
from taskq.app.cli_worker import worker_command

app = typer.Typer(
    name="taskq",
    help="TaskQ: Postgres-backed background jobs.",
    no_args_is_help=True,
    add_completion=False,
    # Expected failures print one line (see cli_support); anything else is a bug and
    # should show a plain traceback, not a pretty one that hides the frames.
    pretty_exceptions_enable=False,
)
app.command("demo")(demo_command)
app.add_typer(migrate_app, name="migrate")
app.command("worker")(worker_command)


def main() -> None:
    """Console-script entry point (``taskq``)."""
    app()


if __name__ == "__main__":
    main()
