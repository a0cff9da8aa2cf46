"""``taskq cron list``: each ``@cron`` schedule of a registry and its next fire times.

Read from the registry alone (no database): what the leader will enqueue, and when.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from taskq.app.cli.output import iso, print_json, print_table
from taskq.app.cli.support import AppDirOption, JsonOption, command_group, fail
from taskq.domain.errors import TaskQError

cron_app = command_group("Inspect the @cron schedules of an actor registry.")


@cron_app.command("list")
def list_schedules(
    actors: Annotated[
        str,
        typer.Option(
            "--actors",
            help="The actor registry as 'package.module:attribute' (as for taskq worker).",
            show_default=False,
        ),
    ],
    count: Annotated[
        int, typer.Option("--count", min=1, max=100, help="How many next fire times to show.")
    ] = 3,
    as_json: JsonOption = False,
    app_dir: AppDirOption = ".",
) -> None:
    """List each schedule (actor, expression, zone) with its next fire times, in UTC."""
    from taskq.app.actors.registry import load_registry
    from taskq.app.scheduling.schedule import schedules_of

    try:
        registry = load_registry(actors, app_dir)
    except TaskQError as exc:
        fail(str(exc))
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = [
        {
            "actor": schedule.actor,
            "cron": schedule.expression.expr,
            "tz": schedule.expression.tz,
            "payload": dict(schedule.payload),
            "next": [iso(t) for t in schedule.expression.upcoming(now, count)],
        }
        for schedule in schedules_of(registry)
    ]
    if as_json:
        print_json(rows)
        return
    print_table(
        ("ACTOR", "CRON", "TZ", "NEXT (UTC)"),
        (
            (row["actor"], row["cron"], row["tz"], ", ".join(str(t) for t in row["next"]))
            for row in rows
        ),
        empty="no @cron schedules in this registry",
    )
