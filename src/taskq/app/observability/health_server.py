"""The health server: HTTP on a Unix socket, in a thread with its own event loop.

``GET /live``, ``/ready``, ``/metrics`` and (when enabled) ``/tasks``; any
other path is 404. The server's loop is not the worker's, so a worker loop
that is blocked never stalls serving: ``/live`` posts a callback to the
worker's loop and answers ``503 {"status":"unresponsive"}`` when it has not
run within :data:`LIVE_BUDGET`; ``/ready`` runs its Postgres ping on the
worker's loop (through the worker's pool) bounded by the ping timeout, and
makes ``/live``'s check alongside it: a ping that a blocked loop never ran is
``loop_blocked`` under the reason ``unresponsive``, not a database timeout.

What is on ``/metrics`` is whatever was registered on the registry it is
given: this module renders it and knows nothing of what it holds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from taskq.app.observability import health_socket
from taskq.app.observability.health_view import WorkerHealth
from taskq.app.observability.loop_stack import thread_stack
from taskq.app.observability.readiness import PingResult, judge_readiness, needs_ping

#: How long the worker's loop has to run ``/live``'s callback (the worker guide's 1.0 s).
LIVE_BUDGET: Final = 1.0
#: How long :meth:`HealthServer.start` waits for the server's thread to serve.
START_BUDGET: Final = 10.0
#: What ``generate_latest`` writes: the Prometheus text format 0.0.4.
METRICS_CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
#: How long closing the server may wait for requests in flight.
STOP_BUDGET: Final = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthConfig:
    """The ``TASKQ_HEALTH_*`` settings the server acts on."""

    socket_path: str
    pg_ping_timeout: float
    tasks_enabled: bool = False
    socket_mode: int = health_socket.DEFAULT_MODE


class HealthServer:
    """Serves one worker's health on a Unix socket from a thread of its own.

    :meth:`start` claims the socket (``SocketBusy`` when a live worker holds
    it) and returns once the server answers; :meth:`stop` closes it and
    removes the socket file. Both are called from the worker's side.
    """

    def __init__(
        self, health: WorkerHealth, registry: CollectorRegistry, config: HealthConfig
    ) -> None:
        self._health = health
        self._registry = registry
        self._config = config
        self._claimed: health_socket.ClaimedSocket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None  # the server loop's; set through the loop
        #: The readiness ping in flight (a future of the server's loop), and when it began.
        self._pinging: asyncio.Future[None] | None = None
        self._ping_started = 0.0

    def __repr__(self) -> str:
        return f"<HealthServer {self._config.socket_path} {'on' if self._thread else 'off'}>"

    @property
    def path(self) -> str:
        return self._config.socket_path

    def start(self) -> None:
        """Claim the socket and serve from a new daemon thread."""
        claimed = health_socket.claim(self._config.socket_path, mode=self._config.socket_mode)
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._claimed = claimed
        self._thread = threading.Thread(
            target=self._serve, args=(claimed, ready), name="taskq-health", daemon=True
        )
        self._thread.start()
        try:
            ready.result(timeout=START_BUDGET)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop serving and remove the socket file (idempotent)."""
        loop, thread, stop = self._loop, self._thread, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(stop.set)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=STOP_BUDGET + 1.0)
        if self._claimed is not None:
            self._claimed.release()
            self._claimed = None

    # -- the server's thread -------------------------------------------------------------

    def _serve(
        self, claimed: health_socket.ClaimedSocket, ready: concurrent.futures.Future[None]
    ) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(claimed, ready))
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
        finally:
            loop.close()

    async def _main(
        self, claimed: health_socket.ClaimedSocket, ready: concurrent.futures.Future[None]
    ) -> None:
        app = web.Application()
        app.router.add_get("/live", self._live)
        app.router.add_get("/ready", self._ready)
        app.router.add_get("/metrics", self._metrics)
        if self._config.tasks_enabled:
            app.router.add_get("/tasks", self._tasks)
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=STOP_BUDGET
        )
        await runner.setup()
        try:
            await web.SockSite(runner, claimed.sock).start()
            self._stop = asyncio.Event()
            ready.set_result(None)
            await self._stop.wait()
        finally:
            await runner.cleanup()
            if self._pinging is not None:
                self._pinging.cancel()  # before this loop closes under its callbacks

    # -- handlers ------------------------------------------------------------------------

    async def _live(self, request: web.Request) -> web.Response:
        if not await self._loop_responds():
            return _json(503, {"status": "unresponsive"})
        return _json(200, {"status": "ok"})

    async def _loop_responds(self) -> bool:
        """Whether the worker's loop runs a callback posted now within :data:`LIVE_BUDGET`."""
        ran: concurrent.futures.Future[None] = concurrent.futures.Future()
        try:
            self._health.loop.call_soon_threadsafe(_set_done, ran)
            await asyncio.wait_for(asyncio.wrap_future(ran), LIVE_BUDGET)
        except (TimeoutError, RuntimeError):  # RuntimeError: the worker's loop is closed
            return False
        return True

    async def _ready(self, request: web.Request) -> web.Response:
        snapshot = self._health.snapshot()
        # /live's check runs beside the ping: a ping missing its timeout because the
        # worker's loop is blocked (a sync call in an async actor) must not blame Postgres.
        responds = asyncio.ensure_future(self._loop_responds())
        try:
            ping = await self._ping() if needs_ping(snapshot) else PingResult("skipped")
            responsive = await responds
        finally:
            responds.cancel()
        if not responsive and ping.outcome == "timeout":
            ping = PingResult("loop_blocked", "not run: the worker's event loop is blocked")
        status, body = judge_readiness(snapshot, ping, loop_responsive=responsive)
        return _json(status, body)

    async def _ping(self) -> PingResult:
        """One ``SELECT 1`` at a time, never cancelled for being slow.

        A ``/ready`` starts a ping unless one is in flight, and waits for it until
        the ping timeout counted from when that ping started; a ping still running
        then is a ``timeout`` and is left to finish (cancelling a query can cost the
        pool its connection). However often ``/ready`` is asked, the worker's pool
        carries at most one ping; one that runs past :func:`_give_up_after` is
        cancelled on the worker's side after all.
        """
        timeout = self._config.pg_ping_timeout
        now = time.monotonic()
        running = self._pinging
        if running is None or running.done():
            ping = _bounded(self._health.ping, _give_up_after(timeout))
            try:
                posted = asyncio.run_coroutine_threadsafe(ping, self._health.loop)
            except RuntimeError:
                ping.close()
                return PingResult("failed", "the worker's event loop is closed")
            running = self._pinging = asyncio.wrap_future(posted)
            running.add_done_callback(_retrieve)
            self._ping_started = now
        left = self._ping_started + timeout - now
        if left > 0:
            with contextlib.suppress(Exception):  # how it ended is read below
                await asyncio.wait_for(asyncio.shield(running), left)
        if not running.done():
            return PingResult("timeout", f"no answer within {timeout:g}s")
        error = running.exception() if not running.cancelled() else asyncio.CancelledError()
        if error is None:
            return PingResult("ok")
        if isinstance(error, TimeoutError):
            return PingResult("timeout", f"no answer within {_give_up_after(timeout):g}s")
        return PingResult("failed", f"{type(error).__name__}: {error}")

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        response = web.Response(body=body)
        response.headers["Content-Type"] = METRICS_CONTENT_TYPE
        return response

    async def _tasks(self, request: web.Request) -> web.Response:
        # Read from this thread, as the loop-lag watchdog does: it answers while the
        # worker's loop is wedged, which is when a dump is wanted most.
        try:
            tasks = self._health.task_dump()
        except Exception as exc:  # the loop changed under the walk: rare, and worth a retry
            return _json(503, {"error": f"{type(exc).__name__}: {exc}; ask again"})
        # A blocked loop's running task shows its await site, not the sync call that
        # holds the thread: the loop thread's own stack says where it really is.
        stack = thread_stack(self._health.loop_thread_id)
        return _json(200, {"tasks": tasks, "loop_thread_stack": stack})


def _give_up_after(timeout: float) -> float:
    """How long a ping may run on the worker's loop before it is cancelled there."""
    return max(5.0, 10 * timeout)


def _retrieve(future: asyncio.Future[None]) -> None:
    # A ping that failed after every /ready stopped waiting: read, so nothing logs it.
    if not future.cancelled():
        future.exception()


def _set_done(future: concurrent.futures.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _bounded(ping: Callable[[], Coroutine[Any, Any, None]], seconds: float) -> None:
    # Runs on the worker's loop: a ping that never answers gives its connection back.
    async with asyncio.timeout(seconds):
        await ping()


def _json(status: int, body: dict[str, object]) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(body, separators=(",", ":")), content_type="application/json"
    )
