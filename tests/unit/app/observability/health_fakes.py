"""A fake worker for the health server's unit tests: a snapshot, a ping, a dump."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Literal

from taskq.app.observability.health_view import WorkerSnapshot

HEALTHY = WorkerSnapshot(
    active_jobs=3,
    is_leader=True,
    shutdown_phase=0,
    shutdown_phase_name=None,
    shutting_down=False,
    started=True,
    shutdown_elapsed_seconds=None,
    loop_tick_ages={"heartbeat": 0.25, "producer": 1.0},
    stale_loops=(),
    redis_configured=False,
)

DRAINING = replace(
    HEALTHY,
    shutdown_phase=1,
    shutdown_phase_name="DRAINING",
    shutting_down=True,
    shutdown_elapsed_seconds=2.5,
)

STALE = replace(HEALTHY, stale_loops=("heartbeat",), loop_tick_ages={"heartbeat": 99.0})

PingBehaviour = Literal["ok", "fail", "hang"]


class FakeHealth:
    """A worker whose state the test sets; ``loop`` is the loop it runs callbacks on."""

    def __init__(self, loop: asyncio.AbstractEventLoop, snapshot: WorkerSnapshot = HEALTHY):
        self._loop = loop
        self.state = snapshot
        self.ping_behaviour: PingBehaviour = "ok"
        self.pings = 0
        self.ping_cancelled = False
        self.dumps = 0
        self._gate: asyncio.Event | None = None
        #: The thread running ``loop``: the test's own, unless a test runs it elsewhere.
        self.loop_thread_id: int | None = threading.get_ident()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def snapshot(self) -> WorkerSnapshot:
        return self.state

    async def ping(self) -> None:
        self.pings += 1
        if self.ping_behaviour == "fail":
            raise ConnectionResetError("the server closed the connection")
        if self.ping_behaviour == "hang":
            self._gate = asyncio.Event()
            try:
                await self._gate.wait()
            except asyncio.CancelledError:
                self.ping_cancelled = True
                raise

    def release(self) -> None:
        """Let a hanging ping answer (call on the worker's loop)."""
        if self._gate is not None:
            self._gate.set()

    def task_dump(self) -> list[dict[str, object]]:
        self.dumps += 1
        return [{"name": "taskq-heartbeat", "coroutine": "run_heartbeat", "frames": ["h.py:1"]}]


@contextlib.contextmanager
def short_dir() -> Iterator[str]:
    """A fresh directory with a short path (a Unix socket path has ~107 bytes at most)."""
    path = tempfile.mkdtemp(prefix="tqh", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
