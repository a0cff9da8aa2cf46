"""Actors with ``@cron`` schedules for the ``taskq cron list`` tests."""

from __future__ import annotations

from pydantic import BaseModel

from taskq import actor, cron


class Empty(BaseModel):
    pass


class Report(BaseModel):
    kind: str


@cron("0 3 * * *", tz="Europe/Berlin")
@actor(queue="maintenance")
async def nightly(payload: Empty) -> None: ...


@cron("*/15 * * * *", payload={"kind": "quarter"})
@actor
async def report(payload: Report) -> None: ...


@actor
async def unscheduled(payload: Empty) -> None: ...


registry = [nightly, report, unscheduled]
