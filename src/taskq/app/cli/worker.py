"""``taskq worker``: run a worker process until it is shut down.

Flags win over ``TASKQ_*`` variables (and ``.env``), which win over defaults.
The exit code is the worker's (see ``docs/worker-reference.md``, "Exit codes").
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from taskq.app.cli.support import AppDirOption, fail
from taskq.app.settings import MAX_CONCURRENCY_LIMIT
from taskq.domain.errors import TaskQError


def worker_command(
    actors: Annotated[
        str,
        typer.Option(
            "--actors",
            help="The actor registry, as package.module:attr (a Mapping or a list/tuple).",
            show_default=False,
        ),
    ],
    app_dir: AppDirOption = ".",
    queues: Annotated[
        list[str] | None,
        typer.Option(
            "--queues",
            help="Queues to consume, comma-separated or repeated (default: TASKQ_QUEUES).",
            show_default=False,
        ),
    ] = None,
    max_concurrency: Annotated[
        int | None,
        typer.Option(
            "--max-concurrency",
            min=1,
            max=MAX_CONCURRENCY_LIMIT,
            help="Jobs run at once (default: TASKQ_MAX_CONCURRENCY).",
            show_default=False,
        ),
    ] = None,
    until_idle: Annotated[
        bool,
        typer.Option(
            "--until-idle",
            help="Exit once the queues drained: 0 ok, 3 failures, 4 timed out, "
            "5 only jobs that no live worker can run are left.",
        ),
    ] = False,
    idle_max_runtime: Annotated[
        float | None,
        typer.Option(
            "--idle-max-runtime",
            help="With --until-idle: give up (exit 4) after this many seconds.",
            show_default=False,
        ),
    ] = None,
    force_update_actor_config: Annotated[
        bool,
        typer.Option(
            "--force-update-actor-config",
            help="Overwrite drifted queue/metadata in actor_config instead of refusing to start.",
        ),
    ] = False,
) -> None:
    """Run a worker: claim jobs from the queues and run them with the registered actors."""
    # Imported here so `taskq --help` and `taskq migrate` never load the runtime.
    from taskq.app.actors.registry import load_registry
    from taskq.app.settings import BUILTIN_DRIVERS, WorkerSettings, missing_pg_dsn
    from taskq.app.worker.main import worker_main

    if idle_max_runtime is not None and not until_idle:
        fail("--idle-max-runtime applies only with --until-idle; add --until-idle or drop it")
    overrides: dict[str, Any] = {}
    if queues:
        # Comma-separated, as TASKQ_QUEUES: '--queues a,b' consumes a and b, not 'a,b'.
        overrides["queues"] = ",".join(queues)
    if max_concurrency is not None:
        overrides["max_concurrency"] = max_concurrency
    if idle_max_runtime is not None:
        overrides["idle_max_runtime"] = idle_max_runtime
    try:
        settings = WorkerSettings.load()
        if overrides:
            settings = settings.with_overrides(**overrides)
        registry = load_registry(actors, app_dir)
        if settings.driver in BUILTIN_DRIVERS and not settings.pg_dsn_direct:
            raise missing_pg_dsn()
    except TaskQError as exc:
        fail(str(exc))
    code = worker_main(
        settings,
        registry,
        until_idle=until_idle,
        force_update_actor_config=True if force_update_actor_config else None,
    )
    raise typer.Exit(code)


__all__ = ["worker_command"]
