"""``taskq queues list|set-mode``: how each queue dispatches, what waits on it, who consumes it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer

from taskq.app.cli.operator import on_store, operate, operator_settings
from taskq.app.cli.output import duration, iso, print_json, print_table
from taskq.app.cli.support import DsnOption, JsonOption, SchemaOption, command_group, fail
from taskq.app.worker.stranded import live_within
from taskq.domain.actor_config import ActorConfig, QueueMode
from taskq.domain.errors import TaskQError
from taskq.domain.status import JobStatus
from taskq.domain.storable import MAX_NAME_LENGTH
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import JobQuery, QueueDepth, WorkerRecord

queues_app = command_group("Inspect queues and set their dispatch mode.")


@dataclass
class QueueView:
    """One queue as ``queues list`` shows it."""

    name: str
    mode: QueueMode = QueueMode.STRICT_FIFO
    counts: dict[JobStatus, int] = field(default_factory=dict)
    oldest_pending_due_at: datetime | None = None
    live_workers: int = 0

    def as_json(self, now: datetime) -> dict[str, Any]:
        age = self.oldest_pending_age(now)
        return {
            "queue": self.name,
            "mode": self.mode.value,
            "pending": self.counts.get(JobStatus.PENDING, 0),
            "scheduled": self.counts.get(JobStatus.SCHEDULED, 0),
            "running": self.counts.get(JobStatus.RUNNING, 0),
            "oldest_pending_due_at": iso(self.oldest_pending_due_at),
            "oldest_pending_age_seconds": None if age is None else age.total_seconds(),
            "live_workers": self.live_workers,
            "consumed": self.live_workers > 0,
        }

    def oldest_pending_age(self, now: datetime) -> timedelta | None:
        if self.oldest_pending_due_at is None:
            return None
        return max(now - self.oldest_pending_due_at, timedelta(0))


@dataclass(frozen=True)
class QueueSnapshot:
    """What ``queues list`` reads from the store, in one go."""

    modes: dict[str, QueueMode]
    depths: list[QueueDepth]
    workers: list[WorkerRecord]
    configs: list[ActorConfig]


async def _snapshot(store: QueueStore) -> QueueSnapshot:
    return QueueSnapshot(
        modes=await store.queue_modes(),
        depths=await store.queue_depths(),
        workers=await store.list_workers(),
        configs=await store.list_actor_configs(),
    )


def queue_views(snapshot: QueueSnapshot, *, now: datetime, live_for: timedelta) -> list[QueueView]:
    """Every queue with a mode set, active jobs, a live consumer or a registered actor.

    A worker is live when seen within ``live_for`` of ``now`` (the worker's own rule for
    stranded jobs: one lease).
    """
    views: defaultdict[str, QueueView] = defaultdict(lambda: QueueView(name=""))

    def view(name: str) -> QueueView:
        found = views[name]
        found.name = name
        return found

    for name, mode in snapshot.modes.items():
        view(name).mode = mode
    for depth in snapshot.depths:
        queue = view(depth.queue)
        queue.counts[depth.status] = depth.count
        if depth.status is JobStatus.PENDING:
            queue.oldest_pending_due_at = depth.oldest_due_at
    for worker in snapshot.workers:
        live = now - worker.last_seen_at <= live_for
        for name in worker.queues:
            view(name).live_workers += 1 if live else 0
    for config in snapshot.configs:
        view(config.queue)
    return [views[name] for name in sorted(views)]


@queues_app.command("list")
def list_queues(
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """List queues: dispatch mode, jobs per active status, how long the oldest pending job
    has been due, and how many live workers consume it.

    Listed: queues with a mode set, with active jobs, consumed by a worker, or home to a
    registered actor. Ages and liveness use this machine's clock against the database's
    timestamps (a worker is live when seen within TASKQ_LOCK_LEASE).
    """
    settings = operator_settings(dsn, schema)
    snapshot = on_store(settings, _snapshot)
    now = datetime.now(UTC)
    views = queue_views(snapshot, now=now, live_for=live_within(settings))
    if as_json:
        print_json([v.as_json(now) for v in views])
        return
    print_table(
        ("QUEUE", "MODE", "PENDING", "SCHEDULED", "RUNNING", "OLDEST PENDING", "LIVE WORKERS"),
        (
            (
                v.name,
                v.mode.value,
                str(v.counts.get(JobStatus.PENDING, 0)),
                str(v.counts.get(JobStatus.SCHEDULED, 0)),
                str(v.counts.get(JobStatus.RUNNING, 0)),
                duration(v.oldest_pending_age(now)),
                str(v.live_workers) if v.live_workers else "none",
            )
            for v in views
        ),
        empty="no queue is known yet",
        keys=("QUEUE", "MODE"),
    )


async def _known_queue(store: QueueStore, queue: str) -> bool:
    """Whether a job (of any status, not archived), an actor's row or a live worker names
    ``queue``: what a mode could apply to."""
    if any(c.queue == queue for c in await store.list_actor_configs()):
        return True
    if any(queue in w.queues for w in await store.list_workers()):
        return True
    if any(d.queue == queue for d in await store.queue_depths()):
        return True
    return bool(await store.list_jobs(JobQuery(queue=queue, limit=1)))


async def _set_mode(store: QueueStore, queue: str, mode: QueueMode, force: bool) -> QueueMode:
    modes = await store.queue_modes()
    if not force and queue not in modes and not await _known_queue(store, queue):
        raise TaskQError(
            f"no job, actor or worker knows queue {queue!r} (a typo?); check the name with "
            "`taskq queues list`, or give --force to set the mode of a queue not used yet"
        )
    was = modes.get(queue, QueueMode.STRICT_FIFO)
    await store.set_queue_mode(queue, mode)
    return was


@queues_app.command("set-mode")
def set_mode(
    queue: Annotated[str, typer.Argument(metavar="QUEUE", help="The queue's name.")],
    mode: Annotated[QueueMode, typer.Argument(metavar="MODE", help="strict_fifo or round_robin.")],
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Set it even though no job, actor or worker knows the queue (yet).",
        ),
    ] = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """Set how a queue dispatches: strict_fifo (priority, then time) or round_robin (one job
    per fairness_key cohort in turn). Workers use it from their next claim, no restart.

    A queue no job, actor or worker knows is refused (a typo leaves a stray row) unless
    --force is given."""
    if not queue:
        fail("QUEUE is empty: name a queue")
    if len(queue) > MAX_NAME_LENGTH:
        fail(f"QUEUE is {len(queue):,} characters; at most {MAX_NAME_LENGTH} fit a store's index")
    was = operate(dsn, schema, lambda store: _set_mode(store, queue, mode, force))
    typer.echo(
        f"queue {queue}: {mode.value} (was {was.value}); workers use it from their next claim"
    )


__all__ = ["QueueSnapshot", "QueueView", "queue_views", "queues_app"]
