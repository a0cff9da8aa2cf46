"""``taskq workgroup start FILE.toml``: run a group of workers under one supervisor.

Settings resolve as the worker's (``.env``, ``TASKQ_*``, then ``--dsn``/``--schema``);
the children inherit the same environment, with the flags turned into the variables
they stand for, so supervisor and children always talk to the same database.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from taskq.app.cli.operator import operator_settings
from taskq.app.cli.support import DsnOption, SchemaOption, command_group, fail, run_async
from taskq.domain.errors import TaskQError

workgroup_app = command_group("Run several workers from one TOML file, under a supervisor.")


@workgroup_app.command("start")
def start(
    file: Annotated[Path, typer.Argument(help="The workgroup file (docs/workgroup.md).")],
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Start each worker entry of FILE as a `taskq worker` child and supervise them.

    Exit codes: 0 every child stopped cleanly; 1 refused to start; 6 a child
    crashed past the restart limit; 7 stopped by a signal but a child exited
    non-zero or was killed after its grace.
    """
    from taskq.app.workgroup.config import load_config
    from taskq.app.workgroup.main import run_workgroup

    try:
        config = load_config(file)
    except TaskQError as exc:
        fail(str(exc))
    settings = operator_settings(dsn, schema)
    env = dict(os.environ)
    if dsn is not None:
        # Every DSN variable, pooled too: --dsn names the one database of the workgroup.
        for variable in ("TASKQ_PG_DSN", "TASKQ_PG_DSN_DIRECT", "TASKQ_PG_DSN_POOLED"):
            env[variable] = settings.pg_dsn_direct
    if schema is not None:
        env["TASKQ_SCHEMA_NAME"] = settings.schema_name
    raise typer.Exit(run_async(run_workgroup(config, settings, env)))


__all__ = ["workgroup_app"]
