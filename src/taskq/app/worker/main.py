"""Entry points: ``worker_main`` (a process) and ``run_worker`` (inside a running loop).

Both take the settings, the actor registry (a ``Mapping[str, ActorRef]`` or
a list/tuple of ``ActorRef``) and, optionally, any of the ports. Ports passed
in are caller-owned and left open; the rest are built by the composition
root from ``TASKQ_DRIVER`` and closed at exit.

Exit codes: 0 clean, 1 configuration error / refused start / the worker
could not keep running, 2 watchdog trip, 3 until-idle with failures,
4 until-idle max runtime exceeded, 5 until-idle with only jobs that no live
worker can run left.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from typing import TYPE_CHECKING

from taskq.app.actors import registry_from
from taskq.app.settings import WorkerSettings
from taskq.app.worker import events
from taskq.app.worker.exit_codes import ExitCode
from taskq.app.worker.exit_guard import ExitGuard, holding_threads, running_job_ids
from taskq.app.worker.protocols import DependenciesLike
from taskq.app.worker.runtime import Worker
from taskq.app.worker.shutdown import install_signal_handlers
from taskq.domain.errors import TaskQError

if TYPE_CHECKING:
    from taskq.app.connections import WorkerConnections
    from taskq.ports.clock import Clock
    from taskq.ports.leader_lock import LeaderLock
    from taskq.ports.notifier import Notifier
    from taskq.ports.queue_store import WorkerStore
    from taskq.ports.rate_limiter import RateLimiter


def worker_main(
    settings: WorkerSettings,
    actor_registry: object,
    *,
    store: WorkerStore | None = None,
    leader_lock: LeaderLock | None = None,
    notifier: Notifier | None = None,
    rate_limiter: RateLimiter | None = None,
    clock: Clock | None = None,
    dependencies: DependenciesLike | None = None,
    until_idle: bool = False,
    force_update_actor_config: bool | None = None,
    connections: WorkerConnections | None = None,
) -> int:
    """Run a worker process to the end; returns its exit code.

    Sets up logging per ``TASKQ_LOG_FORMAT`` / ``TASKQ_LOG_LEVEL``, handles
    SIGTERM/SIGINT, and prints ``taskq: <reason>`` on stderr when the worker
    refuses to start (bad registry, unresolvable dependencies, actor-config
    drift, ...).

    It owns the process (call it as ``sys.exit(worker_main(...))``): when job
    code the worker gave up on still holds the process ``EXIT_GRACE`` seconds
    after the worker stopped (a task that ignores cancellation keeps the loop
    from closing; threads that are not daemons keep the interpreter from
    exiting), the process ends with the exit code (``worker-exit-forced``).
    """
    _ignore_task_dump_signal()  # until the worker takes it, once its ports are open
    events.configure_logging(log_format=settings.log_format, level=settings.log_level)
    # This call owns the process: what was imported and built so far lives as long as it
    # does, so the cyclic GC need not walk it again (full collections would otherwise
    # pause the loop for milliseconds, which shows in enqueue-to-start tail latency).
    gc.collect()
    gc.freeze()
    guard = ExitGuard()
    code, problem = int(ExitCode.ERROR), None
    with asyncio.Runner() as runner:
        try:
            code, problem = runner.run(
                _run(
                    settings,
                    actor_registry,
                    store=store,
                    leader_lock=leader_lock,
                    notifier=notifier,
                    rate_limiter=rate_limiter,
                    clock=clock,
                    dependencies=dependencies,
                    until_idle=until_idle,
                    force_update_actor_config=force_update_actor_config,
                    connections=connections,
                    handle_signals=True,
                )
            )
        finally:
            # The worker's handler is gone (asyncio restores the default, which ends
            # the process): a SIGUSR2 while the process winds down is ignored instead.
            _ignore_task_dump_signal()
            # Closing the loop waits for every task; one that ignores cancellation (a job
            # the shutdown gave up on) would hold it, and the process, forever.
            guard.arm(code, running_job_ids(runner.get_loop()))
    if problem is not None:
        print(f"taskq: {problem}", file=sys.stderr)
    if not holding_threads():
        guard.disarm()  # nothing left to hold the exit; else the guard ends the process
    return code


def _ignore_task_dump_signal() -> None:
    """Ignore SIGUSR2, whose default action ends the process, while the worker does not
    handle it (before its ports are open, after it stopped). ``taskq worker`` does so
    first thing too (``taskq.app.cli``); off the main thread it cannot, and need not."""
    if not hasattr(signal, "SIGUSR2"):
        return
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)


async def run_worker(
    settings: WorkerSettings,
    actor_registry: object,
    *,
    store: WorkerStore | None = None,
    leader_lock: LeaderLock | None = None,
    notifier: Notifier | None = None,
    rate_limiter: RateLimiter | None = None,
    clock: Clock | None = None,
    dependencies: DependenciesLike | None = None,
    until_idle: bool = False,
    force_update_actor_config: bool | None = None,
    connections: WorkerConnections | None = None,
    handle_signals: bool = True,
) -> int:
    """Run a worker on the current event loop until it shuts down; returns the exit code.

    Logging is left as the application configured it. ``handle_signals``
    routes SIGTERM/SIGINT to the worker's graceful shutdown while it runs
    (only possible on the main thread; skipped elsewhere). With an injected
    ``clock`` (a fake one in tests) a watchdog trip makes this return 2
    instead of ending the process, and the real-time loop-lag thread and the
    health socket are off.
    """
    code, _ = await _run(
        settings,
        actor_registry,
        store=store,
        leader_lock=leader_lock,
        notifier=notifier,
        rate_limiter=rate_limiter,
        clock=clock,
        dependencies=dependencies,
        until_idle=until_idle,
        force_update_actor_config=force_update_actor_config,
        connections=connections,
        handle_signals=handle_signals,
    )
    return code


async def _run(
    settings: WorkerSettings,
    actor_registry: object,
    *,
    store: WorkerStore | None,
    leader_lock: LeaderLock | None,
    notifier: Notifier | None,
    rate_limiter: RateLimiter | None,
    clock: Clock | None,
    dependencies: DependenciesLike | None,
    until_idle: bool,
    force_update_actor_config: bool | None,
    connections: WorkerConnections | None,
    handle_signals: bool,
) -> tuple[int, str | None]:
    # Imported here: the composition root imports the driver adapters.
    from taskq.app import composition

    try:
        registry = registry_from(actor_registry)
        ports = await composition.build_worker_ports(
            settings,
            store=store,
            leader_lock=leader_lock,
            notifier=notifier,
            rate_limiter=rate_limiter,
            clock=clock,
            connections=connections,
        )
    except TaskQError as exc:
        events.emit(events.WORKER_CONFIG_ERROR, logging.ERROR, error=str(exc))
        return int(ExitCode.ERROR), str(exc)
    own_clock = clock is None
    worker = Worker(
        settings,
        registry,
        ports,
        # One per worker; the health server's /metrics must be given this same registry.
        metrics_registry=composition.worker_metrics_registry(),
        dependencies=dependencies,
        until_idle=until_idle,
        force_update_actor_config=force_update_actor_config,
        hard_trip=own_clock,
        loop_lag=own_clock,
        serve_health=own_clock,
    )
    remove_handlers = install_signal_handlers(worker.orchestrator) if handle_signals else None
    try:
        code = await worker.run()
    finally:
        if remove_handlers is not None:
            remove_handlers()
        # Bounded: a worker cut off from the database must still exit promptly.
        await ports.close_owned(budget=settings.heartbeat_command_timeout)
    return code, worker.problem


__all__ = ["run_worker", "worker_main"]
