"""One worker: bootstrap, one TaskGroup of long-lived siblings, teardown.

Siblings (all observe ``state.shutdown_event``)::

    heartbeat     leases, cancel phases, isolate-self
    listener      NOTIFY wake-ups, notifier health checks
    leader        election and the maintenance sub-loops
    producer      claims into the local queue
    consumer-N    max_concurrency of them: run jobs
    shutdown      the shutdown orchestrator (signals → phases)
    until_idle    only with until-idle: the drain monitor

Sibling contract (``taskq.domain.watchdog.judge_sibling_exit``): a sibling
that returns while no shutdown is in progress is a bug, so the shutdown
event is set and ``RuntimeError`` raised; one that raises sets the shutdown
event too. Either way the TaskGroup unwinds and the worker exits 1.

Outside the group: the start-mark and completion batchers (they outlive the
consumers so a last write is never dropped) and the shutdown watchdog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider
from prometheus_client import CollectorRegistry

from taskq.app.actors import registry_from
from taskq.app.di import Dependencies
from taskq.app.observability.metrics import WorkerMetrics, new_metrics_registry
from taskq.app.observability.tracing import new_tracing
from taskq.app.settings import WorkerSettings
from taskq.app.worker import events, startup
from taskq.app.worker.consumer import Dispatcher
from taskq.app.worker.exit_codes import ExitCode
from taskq.app.worker.hand_back import LEAVING_BUDGET, hand_back
from taskq.app.worker.health import health_server
from taskq.app.worker.heartbeat import run_heartbeat
from taskq.app.worker.leader import run_leader
from taskq.app.worker.limits import declares_limits
from taskq.app.worker.listener import run_listener
from taskq.app.worker.metrics_view import StateView
from taskq.app.worker.outcome_writes import new_completer
from taskq.app.worker.ports import WorkerPorts
from taskq.app.worker.producer import run_producer
from taskq.app.worker.protocols import ActorLike, ActorScopes, DependenciesLike
from taskq.app.worker.shutdown import HardExitHook, ShutdownOrchestrator
from taskq.app.worker.start_gate import StartGate
from taskq.app.worker.start_marks import StartMarks
from taskq.app.worker.state import WorkerState
from taskq.app.worker.until_idle import run_until_idle
from taskq.app.worker.waiting import with_timeout
from taskq.app.worker.watchdog import (
    LoopLagMonitor,
    ShutdownWatchdog,
    exit_after,
    report_trip,
)
from taskq.domain.errors import TaskQError
from taskq.domain.shutdown import SetShutdownEvent
from taskq.domain.watchdog import CountSiblingCrash, RaiseSiblingReturned, Trip, judge_sibling_exit

#: Most writes one start-mark or completion round trip carries.
MAX_WRITE_BATCH = 100
#: Seconds a watchdog trip gives the OTel SDK to export the trip before ``os._exit``.
TRIP_FLUSH_BUDGET = 1.0


def new_worker_id() -> str:
    return str(uuid.uuid4())


def _hard_exit(code: int) -> None:
    os._exit(code)


class Worker:
    """A worker on ``ports`` with ``registry``; :meth:`run` returns the exit code.

    ``request_shutdown`` is what SIGTERM does (call it on the loop). With
    ``hard_trip=False`` a watchdog trip ends :meth:`run` with exit code 2
    instead of ``os._exit(2)`` (for runs on a fake clock, where a "hang" is
    the test's doing). ``loop_lag`` starts the real-time loop-lag thread.
    ``tracer_provider``: where the attempts' CONSUMER spans go instead of the
    global provider (``TASKQ_OTEL_ENABLED=false``: nowhere); ``meter_provider``
    likewise for the OTel instruments. ``metrics_registry``: the Prometheus
    registry the worker's metrics are registered on (the health socket's
    ``/metrics`` renders it); None: one of its own. Either way it is
    :attr:`metrics_registry`. ``serve_health`` serves the health socket as
    ``TASKQ_HEALTH_*`` say (``worker_main`` and ``run_worker`` on the real clock
    do; a worker on a fake clock has no socket).
    """

    def __init__(
        self,
        settings: WorkerSettings,
        registry: Mapping[str, ActorLike] | Sequence[ActorLike],
        ports: WorkerPorts,
        *,
        dependencies: DependenciesLike | None = None,
        until_idle: bool = False,
        idle_max_runtime: float | None = None,
        force_update_actor_config: bool | None = None,
        worker_id: str | None = None,
        rng: random.Random | None = None,
        hard_trip: bool = True,
        loop_lag: bool = False,
        hard_exit: HardExitHook | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        metrics_registry: CollectorRegistry | None = None,
        serve_health: bool = False,
    ) -> None:
        self.settings = settings
        #: The attempts' spans go to ``tracer_provider``, else the global one (no SDK: none).
        self.tracing = new_tracing(settings.otel_enabled, tracer_provider)
        self.state = WorkerState(
            settings=settings,
            ports=ports,
            # A list/tuple of ActorRef too, as run_worker; anything else gets registry_from's error.
            registry=dict(registry) if isinstance(registry, Mapping) else registry_from(registry),
            worker_id=worker_id or new_worker_id(),
            rng=rng or random.Random(),
            metrics=WorkerMetrics(
                metrics_registry if metrics_registry is not None else new_metrics_registry(),
                otel_enabled=settings.otel_enabled,
                group=settings.worker_group,
                meter_provider=meter_provider,
            ),
        )
        self.metrics = self.state.metrics
        self.metrics.watch(StateView(self.state))
        self.metrics.prepare((name, ref.queue) for name, ref in self.state.registry.items())
        self.metrics.prepare_denials(
            name for name, ref in self.state.registry.items() if declares_limits(ref)
        )
        self.orchestrator = ShutdownOrchestrator(self.state, hard_exit=hard_exit or _hard_exit)
        self.state.stopping.request_shutdown = self.request_shutdown
        self.dependencies = dependencies
        self.until_idle = until_idle
        self.idle_max_runtime = (
            idle_max_runtime if idle_max_runtime is not None else settings.idle_max_runtime
        )
        self.force = (
            settings.force_update_actor_config
            if force_update_actor_config is None
            else force_update_actor_config
        )
        self.hard_trip = hard_trip
        self.loop_lag = loop_lag
        self.serve_health = serve_health
        #: Why the worker refused to start or stopped itself (printed by the CLI), else None.
        self.problem: str | None = None
        self._siblings: dict[str, asyncio.Task[None]] = {}
        self._run_task: asyncio.Task[Any] | None = None
        self._tripped: Trip | None = None
        # The shutdown watchdog and loop-lag thread: they run until the scopes have closed.
        self._watchdog: asyncio.Task[None] | None = None
        self._lag: LoopLagMonitor | None = None

    def __repr__(self) -> str:
        return f"<Worker {self.state.worker_id} {self.orchestrator.phase.name}>"

    @property
    def worker_id(self) -> str:
        return self.state.worker_id

    @property
    def metrics_registry(self) -> CollectorRegistry:
        """The Prometheus registry this worker's metrics are on."""
        return self.metrics.registry

    def request_shutdown(self, reason: str = "SIGTERM") -> None:
        """Start (or, called again, escalate) the graceful shutdown, as SIGTERM would."""
        self.orchestrator.request(reason)

    def alive_siblings(self) -> list[str]:
        return sorted(name for name, task in self._siblings.items() if not task.done())

    # -- run -----------------------------------------------------------------------------

    async def run(self) -> int:
        """Bootstrap, run until shut down, tear down; returns the process exit code.

        The health server (``TASKQ_HEALTH_ENABLED``) serves from before the start-up
        until the worker deregistered; a socket another live worker holds refuses the
        start (exit 1).
        """
        server = health_server(
            self.state,
            self.metrics_registry,
            phase=lambda: self.orchestrator.phase,
            started=lambda: bool(self._siblings),
            serve=self.serve_health,
        )
        if server is None:
            return await self._run()
        try:
            server.start()
        except Exception as exc:  # the socket is taken or unusable (TaskQError), or a bug
            what = "" if isinstance(exc, TaskQError) else "the health server could not start: "
            return self._refuse(exc, what=what)
        events.emit(events.WORKER_HEALTH_SERVING, socket=server.path)
        try:
            return await self._run()
        finally:
            # Off the loop: closing waits for requests in flight, and /live's wait on
            # this very loop would otherwise hold it for its budget.
            await asyncio.to_thread(server.stop)

    async def _run(self) -> int:
        self._run_task = asyncio.current_task()
        dependencies = self.dependencies if self.dependencies is not None else _no_dependencies()
        try:
            dependencies.validate(self.state.registry)
            startup.shared_connection_warning(dependencies, self.state.settings.max_concurrency)
            startup.until_idle_cron_warning(self.state.registry, self.until_idle)
            await startup.start(self.state, force=self.force)
        except TaskQError as exc:
            # Bad configuration, actor-config drift, or no database to register with.
            return self._refuse(exc)
        except Exception as exc:
            # A bug (a custom store's, say): refused like the rest, the traceback logged.
            if not isinstance(exc, startup.StartStepFailed):
                exc = startup.StartStepFailed("start-up", exc)
            events.emit(events.WORKER_START_FAILED, logging.ERROR, exc_info=True, step=exc.step)
            return self._refuse(exc)
        try:
            async with AsyncExitStack() as stack:
                # The watchdog is stopped last: its deadline also bounds the scopes' close
                # (a dependency teardown that never ends, e.g. a pool stuck closing).
                stack.push_async_callback(self._stop_watchdog)
                try:
                    scopes = await stack.enter_async_context(dependencies.open_worker_scopes())
                except Exception as exc:
                    # A PROCESS or LOOP factory failed: the worker cannot start.
                    self._refuse(
                        exc,
                        what="opening the actor dependency scopes failed: ",
                        then=_needed_by(exc, self.state.registry),
                    )
                    return int(ExitCode.ERROR)
                self._start_watchdog()
                await self._run_group(scopes)
        except asyncio.CancelledError:
            if self._tripped is None:
                raise
            # Our own cancel (a soft watchdog trip): consume it and report the trip's code.
            if self._run_task is not None:
                self._run_task.uncancel()
            self.state.stopping.set_exit_code(self._tripped.exit_code)
        except Exception:
            # A sibling crash (its guard logged it and set the code) or a failing
            # scope teardown (logged here).
            if self.state.stopping.exit_code is None:
                events.emit(
                    events.WORKER_SIBLING_CRASHED, logging.ERROR, exc_info=True, loop="worker"
                )
            self.state.stopping.set_exit_code(ExitCode.ERROR)
        finally:
            if self._siblings and not self.state.watch.store_suspect:
                # Normally nothing is left; after a crash, or writes that did not land,
                # what is still owned goes back by the rule for interruptions. (Not while
                # the store is failing: the write would only wait out its timeout; the
                # leases and the leader's sweep cover those jobs.)
                await self._hand_back(
                    "WorkerStopped",
                    "the worker stopped while it held the job (a crash of its own, or an "
                    "outcome write that did not land)",
                    self.settings.heartbeat_command_timeout,
                )
            await startup.deregister(self.state)
        if self.problem is None:
            self.problem = self.state.stopping.problem
        began = self.state.stopping.started_at
        if began is not None:
            self.metrics.shutdown_took(max(self.state.clock.monotonic() - began, 0.0))
        code = (
            self.state.stopping.exit_code
            if self.state.stopping.exit_code is not None
            else int(ExitCode.OK)
        )
        events.emit(events.WORKER_STOPPED, worker_id=self.worker_id, exit_code=code)
        return code

    def _refuse(self, exc: Exception, *, what: str = "", then: str = "") -> int:
        self.problem = f"{what}{exc}{then}"
        events.emit(events.WORKER_CONFIG_ERROR, logging.ERROR, error=self.problem)
        self.state.stopping.set_exit_code(ExitCode.ERROR)
        return int(ExitCode.ERROR)

    async def _run_group(self, scopes: ActorScopes) -> None:
        state = self.state
        store = state.store
        marks = StartMarks(state)
        state.start_marks = marks
        # Start marks are small and written again when given up: the short bound. An
        # outcome can be large and given up means run again: the lease (see write_bounds).
        gate = StartGate(store, state.write_bounds, max_batch=MAX_WRITE_BATCH)
        completer = new_completer(store, state.write_bounds, marks, max_batch=MAX_WRITE_BATCH)
        state.completer = completer
        dispatcher = Dispatcher(
            state, scopes, completer=completer, marks=marks, gate=gate, tracing=self.tracing
        )
        helpers = [
            asyncio.create_task(marks.run(), name="taskq-start-marks"),
            asyncio.create_task(completer.run(), name="taskq-completions"),
            asyncio.create_task(gate.run(), name="taskq-start-gate"),
        ]
        try:
            async with asyncio.TaskGroup() as group:
                bodies = self._sibling_bodies(dispatcher)
                self.metrics.prepare_loops(name for name, _ in bodies)
                for name, body in bodies:
                    self._siblings[name] = group.create_task(
                        self._guard(name, body), name=f"taskq-{name}"
                    )
        finally:
            await dispatcher.close()
            marking = (helpers[0], helpers[2])
            for task in marking:
                task.cancel()  # marks only matter while jobs run
            # Not waited for past the command timeout: a driver's cancellation of a
            # write on a dead network can take many seconds (psycopg: up to 10).
            with contextlib.suppress(TimeoutError):
                await with_timeout(
                    state.clock,
                    self.settings.heartbeat_command_timeout,
                    asyncio.gather(*marking, return_exceptions=True),
                    abandon=True,
                )
            try:
                # Bounded like the other writes past the shutdown: queued outcomes that do
                # not land in time are left to their leases.
                await with_timeout(
                    state.clock,
                    self.settings.heartbeat_command_timeout,
                    completer.close(helpers[1]),
                    abandon=True,
                )
            except TimeoutError:
                events.emit(
                    events.JOB_WRITE_FAILED,
                    logging.ERROR,
                    write="completions",
                    error="the last outcome writes did not land in time; left to their leases",
                )

    def _sibling_bodies(
        self, dispatcher: Dispatcher
    ) -> Sequence[tuple[str, Callable[[], Awaitable[None]]]]:
        state = self.state
        bodies: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("shutdown", self.orchestrator.run),
            ("heartbeat", lambda: run_heartbeat(state)),
            ("listener", lambda: run_listener(state)),
            ("leader", lambda: run_leader(state)),
        ]
        bodies += [
            (f"consumer-{i}", dispatcher.run_consumer) for i in range(self.settings.max_concurrency)
        ]
        # After the consumers: they wait for jobs by the time of its first claim, which then
        # starts their jobs itself (ClaimRequest.start_now) instead of leaving them to marks.
        bodies.append(("producer", lambda: run_producer(state)))
        if self.until_idle:
            max_runtime = self.idle_max_runtime
            bodies.append(
                (
                    "until_idle",
                    lambda: run_until_idle(
                        state, max_runtime=max_runtime, request_shutdown=self.request_shutdown
                    ),
                )
            )
        return bodies

    async def _guard(self, name: str, body: Callable[[], Awaitable[None]]) -> None:
        """Run one sibling under the sibling contract."""
        state = self.state
        try:
            await body()
        except Exception:
            verdict = judge_sibling_exit(
                name, raised=True, shutdown_in_progress=state.stopping.in_progress
            )
            for action in verdict.actions:
                if isinstance(action, SetShutdownEvent):
                    state.shutdown_event.set()
                elif isinstance(action, CountSiblingCrash):
                    state.sibling_crashes[action.loop] += 1
                    state.metrics.sibling_crashed(action.loop)
            events.emit(events.WORKER_SIBLING_CRASHED, logging.ERROR, exc_info=True, loop=name)
            state.stopping.set_exit_code(ExitCode.ERROR)
            raise
        verdict = judge_sibling_exit(
            name, raised=False, shutdown_in_progress=state.stopping.in_progress
        )
        for action in verdict.actions:
            if isinstance(action, SetShutdownEvent):
                state.shutdown_event.set()
            elif isinstance(action, RaiseSiblingReturned):
                if verdict.detector is not None:
                    state.metrics.watchdog_tripped(verdict.detector.value)
                events.emit(
                    events.WORKER_SIBLING_RETURNED,
                    logging.CRITICAL,
                    loop=name,
                    detector=verdict.detector.value if verdict.detector else None,
                )
                state.stopping.set_exit_code(ExitCode.ERROR)
                raise action.error()

    # -- watchdog ------------------------------------------------------------------------

    def _start_watchdog(self) -> None:
        settings = self.settings.watchdog
        if not settings.enabled:
            return
        watchdog = ShutdownWatchdog(
            self.state,
            settings=settings,
            termination_grace_period=self.settings.termination_grace_period,
            siblings=self.alive_siblings,
            on_trip=self._on_trip,
        )
        self._watchdog = asyncio.create_task(watchdog.run(), name="taskq-watchdog")
        if self.loop_lag:
            self._lag = LoopLagMonitor(asyncio.get_running_loop(), self.state, settings)
            self._lag.start()

    async def _stop_watchdog(self) -> None:
        watchdog, lag = self._watchdog, self._lag
        if lag is not None:
            lag.stop()
        if watchdog is not None:
            watchdog.cancel()
            await asyncio.gather(watchdog, return_exceptions=True)

    async def _on_trip(self, trip: Trip) -> None:
        self.metrics.watchdog_tripped(trip.detector.value)
        report_trip(trip)  # first: the dump shows what was wedged
        budget = min(LEAVING_BUDGET, self.settings.heartbeat_command_timeout)
        if self.hard_trip:
            exit_after(budget + 1.0, trip.exit_code)  # even a wedged hand-back cannot stay
        await self._hand_back(
            "WatchdogTrip",
            f"interrupted by a watchdog trip ({trip.detector.value}): {trip.reason}",
            budget,
        )
        if self.hard_trip:
            events.flush_logs()
            self.metrics.flush(TRIP_FLUSH_BUDGET)  # os._exit skips the OTel SDK's own flush
            os._exit(trip.exit_code)
        self._tripped = trip
        if self._run_task is not None:
            self._run_task.cancel()

    async def _hand_back(self, error_class: str, error: str, budget: float) -> None:
        """Hand back what this worker still owns (see ``hand_back``); say how it went."""
        handed = await hand_back(self.state, error_class=error_class, error=error, budget=budget)
        if handed != []:
            events.emit(
                events.WORKER_JOBS_HANDED_BACK,
                logging.WARNING if handed is not None else logging.ERROR,
                jobs=handed,
                reason=error,
                note="retryable and unstarted jobs wait again, attempt not counted; "
                "started non-retryable ones crashed"
                if handed is not None
                else "the hand-back did not land; the leader's sweep reclaims the jobs "
                "when their leases expire",
            )


def _needed_by(exc: Exception, registry: Mapping[str, ActorLike]) -> str:
    """Which actors' parameters need the dependency a ``DependencyError`` names."""
    spec = getattr(exc, "spec", None)
    users = [
        f"actor {ref.name!r}, parameter {name!r}"
        for ref in registry.values()
        for name, wanted in getattr(ref, "dependencies", {}).items()
        if spec is not None and wanted == spec
    ]
    return f" (needed by {'; '.join(users)})" if users else ""


def _no_dependencies() -> DependenciesLike:
    deps: DependenciesLike = Dependencies()  # no providers: fine for actors without dependencies
    return deps
