"""Actors whose payloads and results test what the client stores and the worker reads."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field

from taskq import RetryPolicy, actor


class Signup(BaseModel):
    user_id: int = Field(alias="userId")


class Welcome(BaseModel):
    greeting_text: str = Field(alias="greetingText")


@actor
async def on_signup(payload: Signup) -> Welcome:
    return Welcome(greetingText=f"hi {payload.user_id}")


@actor(retry=RetryPolicy(kind="non_retryable"))
async def untyped_nan(payload: Signup) -> Any:
    """Returns a NaN inside an untyped result: pydantic alone would store it as null."""
    return {"ratio": math.nan}


registry = [on_signup, untyped_nan]
