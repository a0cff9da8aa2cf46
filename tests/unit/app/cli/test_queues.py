"""``taskq queues list|set-mode`` on the memory adapter, through the real entry point."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from tests.unit.app.cli.conftest import Cli

from taskq.app.cli.queues import QueueSnapshot, queue_views
from taskq.domain.actor_config import ActorConfig, QueueMode
from taskq.domain.job import NewJob
from taskq.domain.status import JobStatus
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import QueueDepth, WorkerInfo, WorkerRecord


def test_set_mode_switches_a_queue_and_list_shows_it(cli: Cli) -> None:
    """queues set-mode stores the mode (the store's queue_modes reads it back), says what it
    was, and queues list shows it; an unknown mode is a usage error."""
    cli.on_store(lambda s: s.sync_actor_configs([ActorConfig(actor="fan", queue="multi")]))
    code, out, _ = cli("queues", "set-mode", "multi", "round_robin")
    assert (code, out) == (
        0,
        "queue multi: round_robin (was strict_fifo); workers use it from their next claim\n",
    )
    assert cli.on_store(lambda s: s.queue_modes()) == {"multi": QueueMode.ROUND_ROBIN}
    code, out, _ = cli("queues", "list", "--json")
    (multi,) = json.loads(out)  # the actor's row names it
    assert (multi["queue"], multi["mode"], multi["consumed"]) == ("multi", "round_robin", False)

    code, _, err = cli("queues", "set-mode", "multi", "fastest")
    assert code == 1
    assert err.startswith("taskq: queues set-mode: Invalid value for 'MODE'")


def test_set_mode_refuses_an_empty_long_or_unknown_queue(cli: Cli) -> None:
    """An empty or over-long QUEUE is one line, exit 1; a queue no job, actor or live
    worker knows (a typo) is refused in one line naming it and --force, and no row is
    left; --force sets it. Before, each was rc 0 and a stray row in `queues list`."""
    for name, says in (("", "QUEUE is empty"), ("q" * 201, "QUEUE is 201 characters")):
        code, out, err = cli("queues", "set-mode", name, "round_robin")
        assert (code, out) == (1, ""), err
        assert err.startswith(f"taskq: {says}")
        assert err.count("\n") == 1

    code, out, err = cli("queues", "set-mode", "defualt", "round_robin")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert "'defualt'" in err
    assert "--force" in err
    assert cli.on_store(lambda s: s.queue_modes()) == {}

    code, out, err = cli("queues", "set-mode", "later", "round_robin", "--force")
    assert (code, err) == (0, "")
    assert cli.on_store(lambda s: s.queue_modes()) == {"later": QueueMode.ROUND_ROBIN}
    # A queue with a mode row is known: switching it back needs no --force.
    code, _, err = cli("queues", "set-mode", "later", "strict_fifo")
    assert (code, err) == (0, "")


def test_set_mode_knows_a_queue_from_a_finished_job_or_a_worker(cli: Cli) -> None:
    """A queue only a terminal job or a worker names is known (no --force needed)."""

    async def setup(store: QueueStore) -> None:
        await store.register_worker(
            WorkerInfo(worker_id="w", hostname="h", pid=1, queues=["mail"], actors=["send"])
        )
        job = await store.enqueue(NewJob(actor="old", queue="archive"))
        assert await store.request_cancel(job.job_id) is JobStatus.CANCELLED

    cli.on_store(setup)
    for queue in ("mail", "archive"):
        code, _, err = cli("queues", "set-mode", queue, "round_robin")
        assert (code, err) == (0, ""), queue


def test_list_counts_jobs_per_status_and_names_unconsumed_queues(cli: Cli) -> None:
    """queues list --json: one object per queue with its mode, active counts, oldest pending
    due time, and live workers (none for a queue only an actor's row names)."""

    async def setup(store: QueueStore) -> None:
        await store.register_worker(
            WorkerInfo(worker_id="w", hostname="h", pid=1, queues=["email"], actors=["send"])
        )
        await store.enqueue(NewJob(actor="send", queue="email"))
        await store.enqueue(NewJob(actor="send", queue="email"))
        await store.sync_actor_configs([ActorConfig(actor="nightly", queue="cron")])

    cli.on_store(setup)
    code, out, _ = cli("queues", "list", "--json")
    assert code == 0
    by_name = {q["queue"]: q for q in json.loads(out)}
    assert sorted(by_name) == ["cron", "email"]
    email, cron = by_name["email"], by_name["cron"]
    assert (email["mode"], email["pending"], email["scheduled"], email["running"]) == (
        "strict_fifo",
        2,
        0,
        0,
    )
    assert email["oldest_pending_due_at"] is not None
    assert (cron["pending"], cron["live_workers"], cron["consumed"]) == (0, 0, False)

    code, out, _ = cli("queues", "list")
    cron_row = next(line for line in out.splitlines() if line.strip().startswith("cron"))
    assert cron_row.split()[-1] == "none"


def test_a_worker_not_seen_within_the_lease_does_not_count_as_a_consumer() -> None:
    """queue_views counts only workers seen within live_for of now as consumers, and the
    oldest pending age is now minus the earliest due time."""
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def worker(name: str, seen_ago: float) -> WorkerRecord:
        seen = now - timedelta(seconds=seen_ago)
        return WorkerRecord(
            worker_id=name,
            hostname="h",
            pid=1,
            queues=("q",),
            started_at=seen,
            last_seen_at=seen,
        )

    snapshot = QueueSnapshot(
        modes={},
        depths=[
            QueueDepth(
                queue="q", status=JobStatus.PENDING, count=3, oldest_due_at=now - timedelta(90)
            )
        ],
        workers=[worker("fresh", 5), worker("stale", 61)],
        configs=[],
    )
    (view,) = queue_views(snapshot, now=now, live_for=timedelta(seconds=60))
    assert view.live_workers == 1
    assert view.oldest_pending_age(now) == timedelta(90)
