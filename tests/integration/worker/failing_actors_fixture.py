"""Actors that fail, for the tests of what a worker logs and stores about failed attempts."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from taskq import JobContext, RetryPolicy, actor

#: Two attempts, the second 200 ms after the first (no jitter).
TWICE = RetryPolicy(max_attempts=2, base=timedelta(milliseconds=200), jitter=0.0)


class Order(BaseModel):
    order_id: int


def _charge(order_id: int, attempt: int) -> None:
    raise ConnectionError(f"payment gateway refused order {order_id} (attempt {attempt})")


@actor(retry=TWICE)
async def charge(payload: Order, ctx: JobContext[Order]) -> None:
    """Fails on every attempt, from a helper: its frame is the innermost of the traceback."""
    _charge(payload.order_id, ctx.attempt)


registry = [charge]
