"""Actors for the ``taskq actor-config diff`` tests."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from taskq import actor


class Empty(BaseModel):
    pass


@actor(queue="payments", max_concurrent=5, max_pending=100, result_ttl=timedelta(hours=1))
async def charge(payload: Empty) -> None: ...


@actor(queue="email", metadata={"team": "growth"})
async def send(payload: Empty) -> None: ...


registry = [charge, send]
