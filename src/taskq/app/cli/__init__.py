"""The ``taskq`` command line: one Typer app, one sub-app per command group.

The app is :mod:`taskq.app.cli.root`; ``python -m taskq.app.cli`` runs it (see
``__main__``). :func:`main` answers the four exact probe forms
(``taskq health live|ready|metrics|tasks [--socket PATH]``) without loading
Typer at all: a Kubernetes exec probe runs every few seconds on every pod, and
Typer (with the pydantic it loads) is most of a command's start-up. Anything
else, including ``taskq health --help`` and any mistake, goes through Typer.
"""

from __future__ import annotations

import contextlib
import signal

# First, before the slow imports and the worker's connecting: SIGUSR2's default action
# ends the process, and the worker only takes it (for its task dump) once its ports are
# open, which on a slow database takes seconds. Until then it is ignored.
if hasattr(signal, "SIGUSR2"):
    # Off the main thread (imported by a test) it cannot be set, and need not be.
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)

import sys
from typing import Any, NoReturn


def main(args: list[str] | None = None) -> NoReturn:
    """Console-script entry point (``taskq``).

    A usage error (unknown option or command, bad flag value) prints one
    ``taskq: ...`` line and exits 1, like a bad setting: exit 2 is the
    watchdog's, so a supervisor can tell a typo from a wedged worker.
    """
    argv = sys.argv[1:] if args is None else list(args)
    if argv[:1] == ["health"]:
        from taskq.app.cli.health_probe import probe_command

        code = probe_command(argv[1:])
        if code is not None:
            sys.exit(code)
    from taskq.app.cli.root import run

    run(argv)


def __getattr__(name: str) -> Any:
    # ``from taskq.app.cli import app``: the Typer app, loaded on first use.
    if name == "app":
        from taskq.app.cli.root import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["main"]
