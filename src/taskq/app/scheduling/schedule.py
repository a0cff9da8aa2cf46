"""One ``@cron`` schedule of an actor, and the idempotency key of each of its ticks."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from taskq.app.scheduling.expression import CronExpression
from taskq.domain.job import JSON


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """``actor`` gets one job with ``payload`` at each tick of ``expression``."""

    actor: str
    expression: CronExpression
    payload: Mapping[str, JSON] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """8 hex digits naming expression, zone and payload: two schedules of one actor
        that fire at the same instant stay two jobs, one schedule's tick stays one."""
        text = json.dumps([self.expression.expr, self.expression.tz, self.payload], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    def key_for(self, tick: datetime) -> str:
        """The tick's idempotency key: the store keeps one job per (actor, key), whichever
        leader, and however many, enqueue it."""
        instant = tick.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"cron:{self.fingerprint}:{instant}"


def schedules_of(registry: Mapping[str, Any]) -> list[CronSchedule]:
    """Every schedule of the actors in ``registry`` (an actor without ``@cron`` has none)."""
    found: list[CronSchedule] = []
    for ref in registry.values():
        found.extend(getattr(ref, "cron_schedules", ()))
    return found


__all__ = ["CronSchedule", "schedules_of"]
