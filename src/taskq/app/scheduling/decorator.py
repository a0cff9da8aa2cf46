"""``@cron``: stacked above ``@actor``, it makes the leader enqueue the actor once per tick.

::

    @cron("0 3 * * *", tz="Europe/Berlin")
    @actor(queue="maintenance")
    async def nightly_report(payload: NoArgs) -> None: ...

The job's payload is ``payload`` (default ``{}``: a payload model whose fields
all have defaults). Both the expression and the payload are checked here, so
a bad schedule fails at import, not in the leader at 3 a.m.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from taskq.app.actors.json_values import json_copy
from taskq.app.actors.ref import ActorRef
from taskq.app.scheduling.expression import CronExpression
from taskq.app.scheduling.schedule import CronSchedule
from taskq.domain.errors import ConfigurationError, PayloadValidationError

A = TypeVar("A", bound=ActorRef[Any, Any])


def cron(
    expr: str, *, tz: str = "UTC", payload: Mapping[str, Any] | None = None
) -> Callable[[A], A]:
    """Enqueue the decorated actor at every tick of ``expr`` (5 fields, or 6 with a
    leading seconds field) in IANA zone ``tz``; ``ConfigurationError`` when the
    expression, the zone or the payload is bad, or when not stacked above ``@actor``."""
    try:
        expression = CronExpression(expr, tz)
    except ValueError as exc:
        raise ConfigurationError(f"@cron({expr!r}, tz={tz!r}): {exc}") from None

    def decorate(ref: A) -> A:
        if not isinstance(ref, ActorRef):
            raise ConfigurationError(
                f"@cron({expr!r}) must be stacked above @actor(...), got {ref!r}"
            )
        try:
            fixed = json_copy(dict(payload or {}), "payload")
            dumped = ref.dump_payload(fixed)
        except (PayloadValidationError, ValueError, TypeError) as exc:
            raise ConfigurationError(
                f"@cron({expr!r}) on actor {ref.name!r}: the payload does not validate "
                f"(give cron a payload=..., or default every payload field): {exc}"
            ) from None
        schedule = CronSchedule(actor=ref.name, expression=expression, payload=dumped)
        # The copy is the same ActorRef type as ``ref``: with_cron_schedule copies it.
        return cast(A, ref.with_cron_schedule(schedule))

    return decorate


__all__ = ["cron"]
