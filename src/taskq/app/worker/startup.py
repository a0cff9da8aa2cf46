"""Worker bootstrap: register, sync actor config, and the two bootstrap warnings.

Before anything is written, a worker whose actors declare rate limits or
reservations but that has no rate limiter refuses to start
(:func:`require_rate_limiter`): it could not enforce them.

Actor-config sync (after ``register_worker``):

- capacity fields (max_concurrent, max_pending, result_ttl) are operator-owned:
  a registered literal that differs from the stored value is logged at info
  as ``actor-config-capacity-override`` and never written;
- structural drift (queue, metadata) refuses the start with
  ``ActorConfigDriftList`` (logged as ``actor-config-drift``), unless forced:
  then each drifted field is logged at ERROR as
  ``actor-config-drift-overwrite`` (with ``force=true``) and overwritten.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from typing import Final

from taskq.app.di import Scope
from taskq.app.scheduling.loop import cron_entries
from taskq.app.settings import unknown_variables
from taskq.app.worker import events
from taskq.app.worker.limits import limited_actors
from taskq.app.worker.protocols import ActorLike
from taskq.app.worker.task_views import StartupView, WorkerBasics
from taskq.app.worker.waiting import with_timeout
from taskq.domain.actor_config import ActorConfigSyncReport
from taskq.domain.errors import ActorConfigDriftList, ConfigurationError, TaskQError
from taskq.ports.rate_limiter import RateLimiter
from taskq.ports.store_params import WorkerInfo

DRIFT_HINT: Final = (
    "re-run with --force-update-actor-config (or TASKQ_FORCE_UPDATE_ACTOR_CONFIG=true) "
    "to overwrite the stored values"
)
UNCONSUMED_NOTE: Final = (
    "this worker never claims jobs on these queues; that is only a problem when no other "
    "worker consumes them, because their jobs then stay pending forever"
)


def worker_info(state: WorkerBasics) -> WorkerInfo:
    """This worker's ``workers`` row (at start, and again should a sweep remove it)."""
    return WorkerInfo(
        worker_id=state.worker_id,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        queues=state.queues,
        actors=sorted(state.registry),
        worker_label=state.settings.worker_label,
        workgroup_instance=state.settings.workgroup_instance,
    )


async def start(state: StartupView, *, force: bool) -> None:
    """Register the worker and sync actor config; deregisters again if the sync refuses."""
    require_rate_limiter(state.registry, state.rate_limiter)
    settings = state.settings
    with _step("store.register_worker"):
        await state.store.register_worker(worker_info(state))
    try:
        with _step("store.sync_actor_configs"):
            await sync_actor_configs(state, force=force)
    except BaseException:
        await deregister(state)
        raise
    bootstrap_warnings(state.registry, state.queues)
    unknown = unknown_variables(os.environ)
    if unknown:
        events.emit(
            events.WORKER_SETTINGS_UNKNOWN,
            logging.WARNING,
            variables=unknown,
            note="no setting reads these (a typo?); the value is the closest known name",
        )
    inert = settings.inert_settings()
    if inert:
        events.emit(
            events.WORKER_SETTINGS_INERT,
            logging.WARNING,
            settings=inert,
            note="accepted, but this TaskQ does not act on them yet (see docs/settings.md)",
        )
    events.emit(
        events.WORKER_STARTED,
        worker_id=state.worker_id,
        queues=state.queues,
        actors=sorted(state.registry),
        max_concurrency=settings.max_concurrency,
        pid=os.getpid(),
    )


class StartStepFailed(Exception):
    """A start-up step raised something unexpected (a bug): ``step`` names it."""

    def __init__(self, step: str, error: Exception) -> None:
        super().__init__(f"{step} failed: {type(error).__name__}: {error}")
        self.step = step


@contextlib.contextmanager
def _step(name: str) -> Iterator[None]:
    """Name the step an unexpected exception came from; TaskQ's own errors pass as they are."""
    try:
        yield
    except TaskQError:
        raise
    except Exception as exc:
        raise StartStepFailed(name, exc) from exc


def require_rate_limiter(registry: Mapping[str, ActorLike], limiter: RateLimiter | None) -> None:
    """Refuse (``ConfigurationError``, exit 1) actors with limits on a worker without a limiter."""
    if limiter is not None:
        return
    names = limited_actors(list(registry.values()))
    if names:
        who = "actor" if len(names) == 1 else "actors"
        verb = "declares" if len(names) == 1 else "declare"
        raise ConfigurationError(
            f"{who} {', '.join(repr(n) for n in names)} {verb} rate_limits or reservations, "
            "but this worker has no rate limiter to enforce them: use the asyncpg or psycopg "
            "driver (their Postgres limiter is built in), set TASKQ_REDIS_URL, or pass "
            "rate_limiter= to the worker"
        )


async def sync_actor_configs(state: StartupView, *, force: bool) -> ActorConfigSyncReport:
    """Sync every registered actor's config row; see the module docstring."""
    configs = [ref.config() for _, ref in sorted(state.registry.items())]
    try:
        report = await state.store.sync_actor_configs(configs, force=False)
    except ActorConfigDriftList as drift:
        level = logging.ERROR
        if not force:
            events.emit(
                events.ACTOR_CONFIG_DRIFT,
                level,
                drifts=[
                    {
                        "actor": d.actor,
                        "field": d.field,
                        "stored": d.stored,
                        "registered": d.registered,
                    }
                    for d in drift.drifts
                ],
                hint=DRIFT_HINT,
            )
            raise
        for d in drift.drifts:
            events.emit(
                events.ACTOR_CONFIG_DRIFT_OVERWRITE,
                level,
                actor=d.actor,
                field=d.field,
                stored=d.stored,
                registered=d.registered,
                force=True,
            )
        report = await state.store.sync_actor_configs(configs, force=True)
    for override in report.capacity_overrides:
        events.emit(
            events.ACTOR_CONFIG_CAPACITY_OVERRIDE,
            actor=override.actor,
            field=override.field,
            stored=override.stored,
            registered=override.registered,
        )
    return report


def bootstrap_warnings(registry: Mapping[str, ActorLike], worker_queues: Sequence[str]) -> None:
    """``actors-on-unconsumed-queues`` and ``worker-consumes-no-queues``, as the guide shows."""
    consumed = set(worker_queues)
    stranded = {
        name: ref.queue for name, ref in sorted(registry.items()) if ref.queue not in consumed
    }
    if stranded:
        events.emit(
            events.ACTORS_ON_UNCONSUMED_QUEUES,
            logging.WARNING,
            actors=stranded,
            queues=sorted(set(stranded.values())),
            worker_queues=list(worker_queues),
            note=UNCONSUMED_NOTE,
        )
    if not worker_queues:
        events.emit(events.WORKER_CONSUMES_NO_QUEUES, logging.WARNING, worker_queues=[])
    if not registry:
        events.emit(
            events.WORKER_REGISTRY_EMPTY,
            logging.WARNING,
            note="no actors registered: this worker claims no jobs (it still heartbeats and "
            "may run maintenance as the leader)",
        )


def until_idle_cron_warning(registry: Mapping[str, ActorLike], until_idle: bool) -> None:
    """The guide's start-up WARNING: until-idle with @cron schedules. The leader keeps
    enqueueing ticks, so the queues may never drain (or drain between two ticks and exit
    with schedules still due)."""
    if not until_idle:
        return
    scheduled = sorted({entry.schedule.actor for entry in cron_entries(registry)})
    if scheduled:
        events.emit(
            events.UNTIL_IDLE_WITH_CRON,
            logging.WARNING,
            actors=scheduled,
            note="--until-idle is incompatible with cron-driven workloads, which enqueue "
            "jobs indefinitely; do not combine --until-idle with @cron decorators",
        )


#: Single connections of the built-in drivers: one statement at a time each.
_SINGLE_CONNECTIONS: Final = frozenset(
    {
        ("asyncpg.connection", "Connection"),
        ("psycopg", "AsyncConnection"),
        ("psycopg.connection_async", "AsyncConnection"),
    }
)


def shared_connection_warning(dependencies: object, max_concurrency: int) -> None:
    """``loop-scope-connection-shared``: one LOOP-scope driver connection is shared by every
    concurrent job, which then fail with "another operation is in progress"."""
    registered = getattr(dependencies, "registered", None)
    if max_concurrency <= 1 or not callable(registered):
        return
    for spec in registered():
        kind = getattr(spec, "type", None)
        key = (getattr(kind, "__module__", ""), getattr(kind, "__qualname__", ""))
        if getattr(spec, "scope", None) is Scope.LOOP and key in _SINGLE_CONNECTIONS:
            events.emit(
                events.LOOP_SCOPE_CONNECTION_SHARED,
                logging.WARNING,
                dependency=spec.describe() if hasattr(spec, "describe") else repr(spec),
                max_concurrency=max_concurrency,
                note="one connection runs one statement at a time, and up to "
                "max_concurrency jobs share it: register a pool (asyncpg.Pool, "
                "psycopg_pool.AsyncConnectionPool) at LOOP scope instead, or run with "
                "TASKQ_MAX_CONCURRENCY=1",
            )


async def deregister(state: StartupView) -> None:
    """Remove the worker row (best effort: the leader's stale-worker sweep is the backstop)."""
    try:
        # Bounded: a worker cut off from the database must still exit promptly.
        await with_timeout(
            state.clock,
            state.settings.heartbeat_command_timeout,
            state.store.deregister_worker(state.worker_id),
            abandon=True,
        )
    except (TaskQError, TimeoutError) as exc:
        events.emit(
            events.WORKER_CLEANUP_FAILED, logging.WARNING, step="deregister", error=str(exc)
        )
