"""``taskq health live|ready|metrics|tasks``: ask a running worker over its health socket.

The Typer face of :mod:`taskq.app.cli.health_probe`, which does the work (and
which ``taskq.app.cli.main`` calls directly for the exact probe forms, so an
exec probe never loads Typer). Exit 0 healthy, 1 unhealthy, 2 no worker
answers; see docs/operations-reference.md, "taskq health".
"""

from __future__ import annotations

from typing import Annotated

import typer

from taskq.app.cli.health_probe import DEFAULT_SOCKET_PATH, SOCKET_VARIABLE, ask

health_app = typer.Typer(
    help="Ask a running worker how it is, over its health socket (exit 0 healthy, "
    "1 unhealthy, 2 no worker answers).",
    # Not help and exit 0: an exec probe mistyped as ["taskq", "health"] must fail, so
    # a missing sub-command is click's usage error ("Missing command."), exit 1.
    no_args_is_help=False,
)

SocketOption = Annotated[
    str | None,
    typer.Option(
        "--socket",
        help=f"The worker's health socket (default: {SOCKET_VARIABLE} from the environment "
        f"or .env, else {DEFAULT_SOCKET_PATH}).",
        show_default=False,
    ),
]


@health_app.command("live")
def live(socket_path: SocketOption = None) -> None:
    """Is the worker's event loop responsive? (the liveness probe)"""
    raise typer.Exit(ask("/live", socket_path))


@health_app.command("ready")
def ready(socket_path: SocketOption = None) -> None:
    """Should the worker get work? Not while starting or stopping, stale, or cut off from PG."""
    raise typer.Exit(ask("/ready", socket_path))


@health_app.command("metrics")
def metrics(socket_path: SocketOption = None) -> None:
    """Print the worker's metrics in Prometheus text format."""
    raise typer.Exit(ask("/metrics", socket_path))


@health_app.command("tasks")
def tasks(socket_path: SocketOption = None) -> None:
    """Print the worker's asyncio tasks and where each waits (TASKQ_HEALTH_TASKS_ENABLED)."""
    raise typer.Exit(ask("/tasks", socket_path))


__all__ = ["health_app"]
