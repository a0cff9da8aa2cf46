"""A registry with one ``@cron`` actor every 3 seconds, for the leader-kill cron test."""

from __future__ import annotations

from pydantic import BaseModel

from taskq import actor, cron


class NoArgs(BaseModel):
    pass


@cron("*/3 * * * * *")
@actor
async def every_three_seconds(payload: NoArgs) -> None:
    return None


registry = [every_three_seconds]
