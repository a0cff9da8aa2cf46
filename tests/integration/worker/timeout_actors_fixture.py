"""Actors for the timeout test: one that hangs in its thread, one that ignores its cancel
event, and a healthy one."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from pydantic import BaseModel

from taskq import RetryPolicy, actor

#: Two attempts, the second 200 ms after the first (no jitter).
TWICE = RetryPolicy(max_attempts=2, base=timedelta(milliseconds=200), jitter=0.0)


class Item(BaseModel):
    n: int


@actor(timeout=timedelta(seconds=1), retry=TWICE)
def hangs(payload: Item) -> None:
    """A sync actor that never polls ctx.cancelled: its thread cannot be stopped."""
    time.sleep(3_600)


@actor(timeout=timedelta(seconds=1), retry=RetryPolicy(max_attempts=1))
async def ignores(payload: Item) -> None:
    """An async actor deaf to its cancel event: only a task cancel stops it."""
    await asyncio.sleep(3_600)


@actor
async def healthy(payload: Item) -> int:
    await asyncio.sleep(0.05)
    return payload.n


registry = [hangs, ignores, healthy]
