"""Actor registries the CLI tests point ``--actors`` at."""

from __future__ import annotations

from pydantic import BaseModel

from taskq.app.actors import actor


class Hello(BaseModel):
    name: str


@actor
async def hello(payload: Hello) -> str:
    return f"hello {payload.name}"


registry = [hello]
registry_map = {"hello": hello}
one_shot = (ref for ref in [hello])
