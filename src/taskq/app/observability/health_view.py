"""What the health server may see of a worker: a snapshot, a ping, a task dump.

The worker runtime implements :class:`WorkerHealth` (``taskq.app.worker.health``)
and hands it in; this package never imports the runtime. Everything here is
read from the health server's own thread, so a snapshot is built from plain
values the worker's loop writes (no lock, no per-job cost): at worst it is a
moment old.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSnapshot:
    """The worker's state as ``/ready`` and the gauges report it."""

    active_jobs: int
    is_leader: bool
    #: The shutdown phase's enum value (0 = NONE) and name (None while NONE).
    shutdown_phase: int
    shutdown_phase_name: str | None
    #: True from the first shutdown request on (also a shutdown with no phase: until-idle
    #: done, a sibling's crash), so readiness never lags the phase machine.
    shutting_down: bool
    #: False until the worker's siblings run (registered, actor config synced).
    started: bool
    shutdown_elapsed_seconds: float | None
    loop_tick_ages: Mapping[str, float] = field(default_factory=dict)
    stale_loops: Sequence[str] = ()
    redis_configured: bool = False


class WorkerHealth(Protocol):
    """The read-only view of one worker the health server works from."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The worker's event loop (``/live`` posts a callback to it)."""
        ...

    @property
    def loop_thread_id(self) -> int | None:
        """``threading.get_ident()`` of the thread running :attr:`loop` (None: unknown);
        ``/tasks`` shows that thread's stack, where a blocked loop actually is."""
        ...

    def snapshot(self) -> WorkerSnapshot:
        """The state now; safe to call from another thread."""
        ...

    def ping(self) -> Coroutine[Any, Any, None]:
        """A Postgres round trip (``SELECT 1``) through the worker's pool: run on :attr:`loop`."""
        ...

    def task_dump(self) -> list[dict[str, object]]:
        """Every live task of the worker's loop: name, coroutine, await-site frames.

        Never locals or payloads. Safe to call from another thread (as the
        loop-lag watchdog does), so it answers even while the loop is wedged.
        """
        ...
