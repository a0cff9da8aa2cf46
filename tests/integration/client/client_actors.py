"""A pure actor with a typed result, for client round trips through a real worker."""

from __future__ import annotations

from pydantic import BaseModel

from taskq import actor


class Pair(BaseModel):
    a: int
    b: int


class Total(BaseModel):
    value: int


@actor
async def add(payload: Pair) -> Total:
    return Total(value=payload.a + payload.b)


registry = [add]
