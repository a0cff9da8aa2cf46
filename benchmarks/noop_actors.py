"""The actor the benchmarks enqueue and drain: it does nothing, so what is measured is TaskQ.

Loaded by the worker subprocess as ``--actors noop_actors:registry`` (the
benchmark puts this directory on ``PYTHONPATH``) and imported by the
benchmark itself to enqueue through ``JobsClient``.
"""

from __future__ import annotations

from pydantic import BaseModel

from taskq import actor

#: The queue every benchmark job goes to.
QUEUE = "bench"


class Tick(BaseModel):
    """A small payload, about the size of a typical job reference."""

    n: int


@actor(queue=QUEUE)
async def noop(payload: Tick) -> None:
    """Return at once: the job's cost is TaskQ's own."""


registry = [noop]
