"""What the operator commands share: their settings and the store they run on.

Settings resolve as the worker's do: ``TASKQ_*`` from the environment and
``.env``, then ``--dsn`` and ``--schema``, which win. Each command opens the
store once (``composition.operator_store``), runs one operation and closes it;
any ``TaskQError`` (bad settings, unreachable database, unknown job) is one
line on stderr and exit 1 (``support.fail``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from taskq.app import composition
from taskq.app.cli.support import fail, run_async
from taskq.app.settings import BUILTIN_DRIVERS, WorkerSettings, check_pg_dsn, missing_pg_dsn
from taskq.domain.errors import TaskQError
from taskq.domain.settings_rules import validate_identifier
from taskq.ports.queue_store import QueueStore

T = TypeVar("T")


def operator_settings(dsn: str | None, schema: str | None) -> WorkerSettings:
    """The worker's settings with the flags applied; one-line failure when invalid."""
    overrides: dict[str, Any] = {}
    try:
        if dsn is not None:
            overrides["pg_dsn"] = overrides["pg_dsn_direct"] = check_pg_dsn(dsn)
    except ValueError as exc:
        fail(f"--dsn: {exc}")
    try:
        if schema is not None:
            overrides["schema_name"] = validate_identifier(schema, what="--schema")
        settings = WorkerSettings.load()
        settings = settings.with_overrides(**overrides) if overrides else settings
    except TaskQError as exc:
        fail(str(exc))
    if settings.driver in BUILTIN_DRIVERS and not settings.pg_dsn_direct:
        fail(str(missing_pg_dsn(flag="--dsn")))
    return settings


def on_store(settings: WorkerSettings, operation: Callable[[QueueStore], Awaitable[T]]) -> T:
    """Run ``operation`` on the operator store ``settings`` name, and return its result.

    A ``ValueError`` is a one-line failure too: the store raises it for a value no store
    can keep (a name too long, a NUL), which here is always the operator's input. So is
    an ``OverflowError``: a driver reading a stored time past year 9999.
    """

    async def run() -> T:
        async with composition.operator_store(settings) as store:
            return await operation(store)

    try:
        return run_async(run())
    except ValueError as exc:
        fail(str(exc))
    except OverflowError as exc:
        # A driver decoding a stored time past year 9999 (a row TaskQ did not write, or
        # one written before the limits held): one line, not a traceback.
        fail(
            f"a stored row holds a time Python cannot read ({exc}): a timestamp outside "
            "years 1..9999, written by other means than TaskQ; find the row with SQL "
            "(e.g. WHERE created_at > '9999-12-31') and correct it"
        )


def operate(
    dsn: str | None, schema: str | None, operation: Callable[[QueueStore], Awaitable[T]]
) -> T:
    """``operation`` on the store that ``--dsn`` and ``--schema`` over the settings name."""
    return on_store(operator_settings(dsn, schema), operation)


__all__ = ["on_store", "operate", "operator_settings"]
