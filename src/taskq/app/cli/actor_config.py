"""``taskq actor-config set|get|list|diff``: the stored, operator-owned actor configuration.

Capacity (``max_concurrent``, ``max_pending``, ``result_ttl``) belongs to the
operator: the ``@actor(...)`` literal only seeds a new row, and a worker start
never writes it back. Each field takes effect without a restart. NULL (a
cleared field) means: ``max_concurrent`` unlimited; ``max_pending`` and
``result_ttl`` the ``@actor(...)`` literal.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Annotated, Any

import typer

from taskq.app.cli.operator import operate
from taskq.app.cli.output import duration, print_fields, print_json, print_table
from taskq.app.cli.support import (
    AppDirOption,
    DsnOption,
    JsonOption,
    SchemaOption,
    command_group,
    fail,
)
from taskq.app.settings import parse_duration
from taskq.domain.actor_config import ActorConfig, merge_actor_configs
from taskq.domain.errors import TaskQError, UnknownActorError
from taskq.domain.storable import capacity_count_problem, result_ttl_problem
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import CapacityUpdate

actor_config_app = command_group(
    "Read and tune the stored per-actor configuration (capacity is operator-owned)."
)

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The actor's name.")]

#: Exit code of ``diff`` when a worker started with the registry would refuse to start.
EXIT_STRUCTURAL_DRIFT = 3


def config_json(config: ActorConfig) -> dict[str, Any]:
    """An actor_config row as ``--json`` prints it (field names documented in docs/cli.md)."""
    return {
        "actor": config.actor,
        "queue": config.queue,
        "metadata": dict(config.metadata),
        "max_concurrent": config.max_concurrent,
        "max_pending": config.max_pending,
        "result_ttl_seconds": (
            None if config.result_ttl is None else config.result_ttl.total_seconds()
        ),
    }


def _max_concurrent(value: int | None) -> str:
    return "unlimited" if value is None else str(value)


#: What an unset max_pending or result_ttl says applies instead (``list`` says "literal").
_LITERAL = "the @actor literal"


def _max_pending(value: int | None, unset: str = _LITERAL) -> str:
    return unset if value is None else str(value)


def _result_ttl(value: timedelta | None, unset: str = _LITERAL) -> str:
    return unset if value is None else duration(value, exact=True)


def _no_row(actor: str) -> str:
    return (
        f"actor {actor!r} has no actor_config row: a worker that registers it creates the row "
        "when it starts (check the name with `taskq actor-config list`)"
    )


def _print_config(config: ActorConfig) -> None:
    print_fields(
        [
            ("actor", config.actor),
            ("queue", config.queue),
            ("metadata", json.dumps(dict(config.metadata), sort_keys=True)),
            ("max_concurrent", _max_concurrent(config.max_concurrent)),
            ("max_pending", _max_pending(config.max_pending)),
            ("result_ttl", _result_ttl(config.result_ttl)),
        ]
    )


def _result_ttl_option(value: str | None) -> timedelta | None:
    if value is None:
        return None
    try:
        ttl = parse_duration(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if ttl < timedelta(0):
        raise typer.BadParameter(f"must not be negative, got {value!r}")
    problem = result_ttl_problem(ttl)
    if problem is not None:
        fail(f"--result-ttl {problem}")
    return ttl


@actor_config_app.command("set")
def set_config(
    name: NameArgument,
    max_concurrent: Annotated[
        int | None,
        typer.Option(
            "--max-concurrent",
            min=0,
            help="Jobs of this actor running at once, fleet-wide (0 pauses dispatch). "
            "Effective at the next claim.",
            show_default=False,
        ),
    ] = None,
    max_pending: Annotated[
        int | None,
        typer.Option(
            "--max-pending",
            min=0,
            help="Pending + scheduled jobs an enqueue may reach (0 refuses every enqueue). "
            "Effective for enqueues from now.",
            show_default=False,
        ),
    ] = None,
    result_ttl: Annotated[
        str | None,
        typer.Option(
            "--result-ttl",
            metavar="DURATION",
            help="How long a result is kept after its job ends (30d, 24h, 90m, PT1H, seconds). "
            "Effective for jobs ending from now.",
            show_default=False,
        ),
    ] = None,
    clear_max_concurrent: Annotated[
        bool, typer.Option("--clear-max-concurrent", help="Store NULL: unlimited.")
    ] = False,
    clear_max_pending: Annotated[
        bool, typer.Option("--clear-max-pending", help="Store NULL: back to the @actor literal.")
    ] = False,
    clear_result_ttl: Annotated[
        bool, typer.Option("--clear-result-ttl", help="Store NULL: back to the @actor literal.")
    ] = False,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Change an actor's stored capacity; no worker restart needed.

    Only the fields given change. The actor must have a row (a worker that registers it
    creates one when it starts): a name without one is refused.
    """
    ttl = _result_ttl_option(result_ttl)
    for flag, count in (("--max-concurrent", max_concurrent), ("--max-pending", max_pending)):
        if count is not None and (problem := capacity_count_problem(count)) is not None:
            fail(f"{flag} {problem}")
    clear = {
        field
        for field, flag in (
            ("max_concurrent", clear_max_concurrent),
            ("max_pending", clear_max_pending),
            ("result_ttl", clear_result_ttl),
        )
        if flag
    }
    given = {
        field
        for field, value in (
            ("max_concurrent", max_concurrent),
            ("max_pending", max_pending),
            ("result_ttl", ttl),
        )
        if value is not None
    }
    both = sorted(given & clear)
    if both:
        flag = both[0].replace("_", "-")
        fail(f"--{flag} and --clear-{flag} contradict each other: give one")
    if not given and not clear:
        fail(
            "nothing to change: give --max-concurrent, --max-pending, --result-ttl or a "
            "--clear-... flag"
        )
    update = CapacityUpdate(
        actor=name,
        max_concurrent=max_concurrent,
        max_pending=max_pending,
        result_ttl=ttl,
        clear=frozenset(clear),
    )
    config = operate(dsn, schema, lambda store: _set(store, update))
    if as_json:
        print_json(config_json(config))
        return
    _print_config(config)


async def _set(store: QueueStore, update: CapacityUpdate) -> ActorConfig:
    try:
        return await store.set_actor_capacity(update)
    except UnknownActorError:
        raise TaskQError(_no_row(update.actor)) from None


async def _get(store: QueueStore, actor: str) -> ActorConfig:
    config = await store.get_actor_config(actor)
    if config is None:
        raise TaskQError(_no_row(actor))
    return config


@actor_config_app.command("get")
def get_config(
    name: NameArgument,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Show an actor's stored row (an unset capacity says what applies instead)."""
    config = operate(dsn, schema, lambda store: _get(store, name))
    if as_json:
        print_json(config_json(config))
        return
    _print_config(config)


@actor_config_app.command("list")
def list_configs(
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """List every stored actor row: its queue and capacity."""
    configs = operate(dsn, schema, lambda store: store.list_actor_configs())
    if as_json:
        print_json([config_json(c) for c in configs])
        return
    print_table(
        ("ACTOR", "QUEUE", "MAX CONCURRENT", "MAX PENDING", "RESULT TTL"),
        (
            (
                c.actor,
                c.queue,
                _max_concurrent(c.max_concurrent),
                _max_pending(c.max_pending, "literal"),
                _result_ttl(c.result_ttl, "literal"),
            )
            for c in configs
        ),
        empty="no actor has a row yet (a worker creates them when it starts)",
        keys=("ACTOR", "QUEUE"),
    )


def _registered(spec: str, app_dir: str) -> list[ActorConfig]:
    """The rows the registry ``spec`` would sync, with metadata as a store keeps it."""
    from taskq.app.actors.registry import load_registry

    try:
        registry = load_registry(spec, app_dir)
    except TaskQError as exc:
        fail(str(exc))
    # Metadata is compared as a store keeps it: through JSON (a tuple reads back a list).
    return [
        dataclasses.replace(
            ref.config(), metadata=json.loads(json.dumps(dict(ref.config().metadata)))
        )
        for ref in registry.values()
    ]


def _cell(value: object) -> str:
    """A stored or registered value as the diff table shows it: a duration as `set` takes
    it (``1h 30m``, ``1.5s``), a name unquoted, metadata as JSON, NULL as ``null``."""
    if value is None:
        return "null"
    if isinstance(value, timedelta):
        return duration(value, exact=True)
    if isinstance(value, str | int):
        return str(value)
    return json.dumps(value, sort_keys=True)


def _difference(actor: str, kind: str) -> dict[str, Any]:
    return {"actor": actor, "kind": kind, "field": None, "stored": None, "registered": None}


def _shown(field: str, value: object) -> object:
    if field == "result_ttl":
        return None if value is None else value.total_seconds()  # type: ignore[attr-defined]
    return value


@actor_config_app.command("diff")
def diff_configs(
    actors: Annotated[
        str,
        typer.Option(
            "--actors",
            help="The actor registry as 'package.module:attribute', as `taskq worker` takes it.",
            show_default=False,
        ),
    ],
    app_dir: AppDirOption = ".",
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Compare a registry's @actor(...) declarations with the stored rows.

    Lists, per actor: no row yet (a worker creates it); structural drift (queue,
    metadata: a worker started with this registry refuses to start, exit 3); capacity
    overrides (the stored value wins; `set` applies a literal). Rows of actors not in the
    registry are listed too.
    """
    registered = _registered(actors, app_dir)
    stored = operate(dsn, schema, lambda store: store.list_actor_configs())
    merge = merge_actor_configs({c.actor: c for c in stored}, registered)
    names = {c.actor for c in registered}
    # (what --json prints, the stored value, the registered value)
    rows: list[tuple[dict[str, Any], object, object]] = [
        (_difference(a, "missing"), None, None) for a in merge.created
    ]
    for kind, found in (("drift", merge.drifts), ("override", merge.report.capacity_overrides)):
        rows += [
            (
                {
                    "actor": d.actor,
                    "kind": kind,
                    "field": d.field,
                    "stored": _shown(d.field, d.stored),
                    "registered": _shown(d.field, d.registered),
                },
                d.stored,
                d.registered,
            )
            for d in found
        ]
    rows += [
        (_difference(c.actor, "unregistered"), None, None) for c in stored if c.actor not in names
    ]
    rows.sort(key=lambda r: (r[0]["actor"], r[0]["kind"], r[0]["field"] or ""))
    if as_json:
        print_json([r[0] for r in rows])
    else:
        print_table(
            ("ACTOR", "KIND", "FIELD", "STORED", "REGISTERED"),
            (
                (
                    d["actor"],
                    d["kind"],
                    d["field"] or "-",
                    "-" if d["kind"] in ("missing", "unregistered") else _cell(stored_value),
                    "-" if d["kind"] in ("missing", "unregistered") else _cell(registered),
                )
                for d, stored_value, registered in rows
            ),
            empty="the stored rows match the registry",
            keys=("ACTOR", "KIND", "FIELD"),
        )
    if merge.drifts:
        raise typer.Exit(EXIT_STRUCTURAL_DRIFT)


__all__ = ["EXIT_STRUCTURAL_DRIFT", "actor_config_app", "config_json"]
