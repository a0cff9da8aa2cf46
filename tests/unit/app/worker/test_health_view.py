"""The worker's side of the health server: what a snapshot says of a WorkerState."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, generate_latest
from tests.unit.app.worker.harness import make_settings, memory_ports

from taskq.adapters.memory import FakeClock, MemoryBackend
from taskq.app.worker.health import StateHealth, health_server
from taskq.app.worker.state import WorkerState
from taskq.domain.shutdown import ShutdownPhase


def _state(clock: FakeClock, **settings: object) -> WorkerState:
    backend = MemoryBackend(clock=clock)
    return WorkerState(
        settings=make_settings(**settings),
        ports=memory_ports(backend, clock),
        registry={},
        worker_id="w-1",
    )


async def test_snapshot_reads_jobs_leadership_phase_and_stale_loops() -> None:
    clock = FakeClock()
    state = _state(
        clock,
        redis_url="redis://localhost:6379/0",
        watchdog_stale_floor=5.0,
        watchdog_tick_grace_factor=2.0,
        # A beat that fails is known within 2 s, before the 5 s floor (the timing rule).
        heartbeat_interval=1.0,
        heartbeat_command_timeout=1.0,
    )
    phase = ShutdownPhase.NONE
    health = StateHealth(
        state, asyncio.get_running_loop(), phase=lambda: phase, started=lambda: True
    )
    state.liveness.tick("heartbeat", period=1.0)
    state.liveness.tick("leader.sweep", period=30.0)
    state.active.enter()
    state.active.enter()
    state.leadership.is_leader = True
    clock.advance(10.0)  # heartbeat: 10 s > max(1 x 2, 5); sweep: 10 s < max(30 x 2, 5)
    now = health.snapshot()
    assert now.active_jobs == 2
    assert now.is_leader is True
    assert now.redis_configured is True
    assert now.stale_loops == ["heartbeat"]
    assert now.loop_tick_ages == {"heartbeat": 10.0, "leader.sweep": 10.0}
    assert (now.shutdown_phase, now.shutdown_phase_name, now.shutting_down) == (0, None, False)
    assert now.shutdown_elapsed_seconds is None

    state.stopping.started_at = clock.monotonic()
    phase = ShutdownPhase.CANCELLING
    clock.advance(2.5)
    leaving = health.snapshot()
    assert (leaving.shutdown_phase, leaving.shutdown_phase_name) == (2, "CANCELLING")
    assert leaving.shutting_down is True
    assert leaving.shutdown_elapsed_seconds == 2.5


async def test_the_gauges_are_registered_even_without_a_server() -> None:
    """No socket (a fake clock, or TASKQ_HEALTH_ENABLED=false), but the registry an
    application scrapes itself still has the three gauges."""
    state = _state(FakeClock())
    registry = CollectorRegistry()
    server = health_server(
        state, registry, phase=lambda: ShutdownPhase.NONE, started=lambda: True, serve=False
    )
    assert server is None
    text = generate_latest(registry).decode()
    for name in ("taskq_active_jobs 0.0", "taskq_is_leader 0.0", "taskq_shutdown_phase 0.0"):
        assert name in text
    disabled = _state(FakeClock(), health_enabled=False)
    assert (
        health_server(
            disabled, CollectorRegistry(), phase=lambda: ShutdownPhase.NONE, started=lambda: True
        )
        is None
    )


async def test_heartbeat_is_listed_from_the_start_before_its_first_beat() -> None:
    """The heartbeat's first tick is an interval (10 s) away: until then it was missing
    from /ready's loop_tick_ages and taskq_loop_tick_age_seconds. Listed from its start,
    with its age since then, and the loop-lag detector is not armed by that."""
    from taskq.app.worker.heartbeat import run_heartbeat

    clock = FakeClock()
    state = _state(clock, heartbeat_interval=10.0)
    health = StateHealth(
        state, asyncio.get_running_loop(), phase=lambda: ShutdownPhase.NONE, started=lambda: True
    )
    beating = asyncio.create_task(run_heartbeat(state))
    try:
        await asyncio.sleep(0)
        clock.advance(3.0)
        assert health.snapshot().loop_tick_ages == {"heartbeat": 3.0}
        assert health.snapshot().stale_loops == []
        assert state.liveness.ticked is False
    finally:
        state.shutdown_event.set()
        await asyncio.wait_for(beating, 5)
