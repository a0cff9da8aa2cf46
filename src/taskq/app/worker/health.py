"""The worker's side of the health server: what it may see, and when it runs.

:class:`StateHealth` is the read-only view (``observability.health_view``)
over one worker's state; :func:`health_server` builds the server for a
worker when ``TASKQ_HEALTH_ENABLED`` is true, with the worker guide's gauges
registered on the process's metrics registry.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from taskq.app.observability.gauges import register_worker_gauges
from taskq.app.observability.health_view import WorkerSnapshot
from taskq.app.worker.task_views import HealthView
from taskq.app.worker.watchdog import task_dump
from taskq.domain.shutdown import ShutdownPhase

if TYPE_CHECKING:
    from taskq.app.observability.health_server import HealthServer


class StateHealth:
    """One worker's state as the health server reads it (from its own thread)."""

    def __init__(
        self,
        state: HealthView,
        loop: asyncio.AbstractEventLoop,
        *,
        phase: Callable[[], ShutdownPhase],
        started: Callable[[], bool],
    ) -> None:
        self._state = state
        self._loop = loop
        self._phase = phase
        self._started = started
        # Built on the worker's loop (health_server says so): this thread runs it.
        self._loop_thread_id = threading.get_ident()

    def __repr__(self) -> str:
        return f"<StateHealth {self._state.worker_id}>"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def loop_thread_id(self) -> int | None:
        return self._loop_thread_id

    def snapshot(self) -> WorkerSnapshot:
        state = self._state
        now = state.clock.monotonic()
        phase = self._phase()
        watchdog = state.settings.watchdog
        table = state.liveness.table  # immutable, swapped on each tick: one consistent read
        stale = table.stale(now, watchdog.tick_grace_factor, watchdog.stale_floor)
        started_at = state.stopping.started_at
        return WorkerSnapshot(
            active_jobs=state.active.busy,
            is_leader=state.leadership.is_leader,
            shutdown_phase=int(phase),
            shutdown_phase_name=None if phase is ShutdownPhase.NONE else phase.name,
            shutting_down=state.stopping.in_progress,
            started=self._started(),
            shutdown_elapsed_seconds=None if started_at is None else max(0.0, now - started_at),
            loop_tick_ages=table.tick_ages(now),
            stale_loops=[name for name, _ in stale],
            redis_configured=state.settings.redis_url is not None,
        )

    def ping(self) -> Coroutine[Any, Any, None]:
        return self._state.store.ping()

    def task_dump(self) -> list[dict[str, object]]:
        return task_dump(self._loop)


def health_server(
    state: HealthView,
    registry: CollectorRegistry,
    *,
    phase: Callable[[], ShutdownPhase],
    started: Callable[[], bool],
    serve: bool = True,
) -> HealthServer | None:
    """The worker's health server (not started), or None when not ``serve`` or with
    ``TASKQ_HEALTH_ENABLED=false``.

    Call on the worker's loop. The gauges are registered on ``registry`` either way:
    an application scraping the registry itself still sees them.
    """
    health = StateHealth(state, asyncio.get_running_loop(), phase=phase, started=started)
    register_worker_gauges(registry, health.snapshot)
    settings = state.settings
    if not (serve and settings.health_enabled):
        return None
    # Imported only when serving: the HTTP server costs a worker without it ~0.2 s of start-up.
    from taskq.app.observability.health_server import HealthConfig, HealthServer

    config = HealthConfig(
        socket_path=settings.health_socket_path,
        pg_ping_timeout=settings.health_pg_ping_timeout,
        tasks_enabled=settings.health_tasks_enabled,
        socket_mode=settings.health_socket_mode,
    )
    return HealthServer(health, registry, config)
