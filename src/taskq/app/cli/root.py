"""The ``taskq`` Typer app: one sub-app (or command) per command group.

Each command group lives in its own module of this package and is listed in
:data:`_GROUPS`; a group is imported only when it runs (or ``taskq --help``
lists it), so no command pays for the database drivers and the worker runtime
that ``migrate`` and ``worker`` import.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import sys
from types import ModuleType
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

#: Command name -> (module, attribute): a Typer sub-app, or a function for one command.
_GROUPS: dict[str, tuple[str, str]] = {
    "actor-config": ("taskq.app.cli.actor_config", "actor_config_app"),
    "cron": ("taskq.app.cli.cron", "cron_app"),
    "demo": ("taskq.app.cli.demo", "demo_command"),
    "health": ("taskq.app.cli.health", "health_app"),
    "jobs": ("taskq.app.cli.jobs", "jobs_app"),
    "migrate": ("taskq.app.cli.migrate", "migrate_app"),
    "queues": ("taskq.app.cli.queues", "queues_app"),
    "worker": ("taskq.app.cli.worker", "worker_command"),
    "workers": ("taskq.app.cli.workers", "workers_app"),
    "workgroup": ("taskq.app.cli.workgroup", "workgroup_app"),
}


def _taskq() -> None:
    # The group's callback: a Typer app with one is a group even with no command of its own.
    pass


class _LazyGroup(TyperGroup):
    """The top-level group: each command's module is imported when it is looked up."""

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted(_GROUPS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        where = _GROUPS.get(cmd_name)
        if where is None:
            return None
        found = getattr(importlib.import_module(where[0]), where[1])
        # Built inside a group of its own, as add_typer/command would: the same options
        # (no completion ones), the same help.
        holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        holder.callback()(_taskq)
        if isinstance(found, typer.Typer):
            holder.add_typer(found, name=cmd_name)
        else:
            holder.command(cmd_name)(found)
        command = typer.main.get_group(holder).commands[cmd_name]
        command.name = cmd_name
        _plain_help(command)
        return command

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        # Typer suggests a near name from the commands already built, none in a lazy
        # group: suggest from the names, so `taskq job list` says "Did you mean 'jobs'?".
        try:
            return super().resolve_command(ctx, args)
        except _click_exceptions().UsageError as exc:
            near = difflib.get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if near and "Did you mean" not in exc.message:
                shown = ", ".join(repr(name) for name in near)
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {shown}?"
            raise

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)
        for param in params:
            _plain_option(param, ctx)
        return params


#: Typer's type labels and what the help shows instead: one short word.
_SHORT_TYPES: dict[str, str] = {
    "<str>": "TEXT",
    "<list[str]>": "TEXT",
    "<int>": "INTEGER",
    "<int range>": "INTEGER",
    "<float>": "FLOAT",
    "<float range>": "FLOAT",
    "<path>": "PATH",
}


def _plain_option(param: Any, ctx: Any) -> None:
    # Typer shows every option's type as `<bool>`, `<str>`...: a flag takes no value, so
    # it shows none, and a value a short word, so the option names keep the room they
    # need at 80 columns.
    if getattr(param, "is_flag", False):
        param.metavar = ""
    elif getattr(param, "param_type_name", "") == "argument" and hasattr(param, "display_type"):
        # An argument's metavar is its name; its type column has a word of its own.
        short = _SHORT_TYPES.get(param.display_type(ctx))
        if short is not None:
            param.display_type_rich = lambda ctx, short=short: short
    elif param.metavar is None and hasattr(param, "display_type"):
        shown = param.display_type(ctx)
        short = _SHORT_TYPES.get(shown)
        if short is not None:
            param.metavar = short
        elif param.param_type_name == "option" and "|" in shown and len(shown) > 24:
            # A long `<a|b|c>` is cut mid-word in the type column: a name goes there and
            # the choices go in the help, which wraps between words.
            param.metavar = str(param.name).upper()
            choices = ", ".join(shown.strip("<>").split("|"))
            param.help = f"{param.help or ''} One of: {choices}.".strip()
    range_of = getattr(param, "_get_number_range_help_str", None)
    shown_range = range_of() if callable(range_of) else None
    if shown_range:
        # A range (`[1<=x<=10000]`) in the type column squeezes the option names: it goes
        # at the end of the option's help instead.
        param.help = f"{param.help or ''} Range: {shown_range}.".strip()
        param._get_number_range_help_str = lambda: None


def _one_line_paragraphs(text: str) -> str:
    # Typer's rich help keeps a docstring's line breaks past its first paragraph (and
    # in the command lists), which at 80 columns breaks lines mid-sentence: each
    # paragraph becomes one line for the terminal to wrap. `\b` keeps a paragraph as is.
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        paragraph if paragraph.startswith("\b") else " ".join(paragraph.split("\n"))
        for paragraph in paragraphs
    )


def _plain_help(command: Any) -> None:
    """``command`` and its sub-commands list their options (help included) plainly, and
    their help text in paragraphs the terminal wraps."""
    if command.help:
        command.help = _one_line_paragraphs(command.help)
    get_params = command.get_params

    def plain_params(ctx: Any) -> list[Any]:
        params: list[Any] = get_params(ctx)
        for param in params:
            _plain_option(param, ctx)
        return params

    command.get_params = plain_params
    for sub in getattr(command, "commands", {}).values():
        _plain_help(sub)


app = typer.Typer(
    name="taskq",
    cls=_LazyGroup,
    help="TaskQ: Postgres-backed background jobs.",
    no_args_is_help=True,
    add_completion=False,
    # -h as well as --help, on every command (a sub-command's context inherits it).
    context_settings={"help_option_names": ["-h", "--help"]},
    # Expected failures print one line (see cli.support); anything else is a bug and
    # should show a plain traceback, not a pretty one that hides the frames.
    pretty_exceptions_enable=False,
)


#: The distribution TaskQ is installed as (``[project] name`` in pyproject.toml).
DISTRIBUTION = "taskq-pg"


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"taskq {version(DISTRIBUTION)}")
        except PackageNotFoundError:
            typer.echo(f"taskq: the {DISTRIBUTION!r} distribution is not installed", err=True)
            raise typer.Exit(1) from None
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print the installed TaskQ version and exit.",
        ),
    ] = False,
) -> None:
    pass


def _click_exceptions() -> ModuleType:
    # Recent typer vendors click as typer._click; older ones use click itself.
    try:
        return importlib.import_module("typer._click.exceptions")
    except ImportError:
        return importlib.import_module("click.exceptions")


def run(args: list[str] | None = None) -> NoReturn:
    """Run the command line (what ``taskq.app.cli.main`` does past the probe's fast path).

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
        group: Any = exc.ctx.command if exc.ctx is not None else None
        if message == "Missing command." and hasattr(group, "list_commands"):
            # `taskq health` alone: say what may follow, as the help would.
            choices = ", ".join(group.list_commands(exc.ctx))
            message = f"Missing command: one of {choices} (taskq {where} --help)"
        typer.echo(f"taskq: {where + ': ' if where else ''}{message}", err=True)
        sys.exit(1)
    except typer.Abort:
        typer.echo("taskq: aborted", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
