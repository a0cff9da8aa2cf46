"""``taskq workers list``: the registered worker processes, as the database sees them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from taskq.app.cli.operator import operate
from taskq.app.cli.output import duration, iso, print_json, print_table, text, when
from taskq.app.cli.support import DsnOption, JsonOption, SchemaOption, command_group
from taskq.ports.store_params import WorkerStatus

workers_app = command_group("Inspect the registered worker processes.")


def worker_json(status: WorkerStatus) -> dict[str, Any]:
    """A worker as ``--json`` prints it (field names documented in docs/cli.md)."""
    worker = status.worker
    return {
        "id": worker.worker_id,
        "host": worker.hostname,
        "pid": worker.pid,
        "label": worker.worker_label,
        "workgroup_instance": worker.workgroup_instance,
        "queues": list(worker.queues),
        "started_at": iso(worker.started_at),
        "last_seen_at": iso(worker.last_seen_at),
        "leader": status.is_leader,
        "jobs_held": status.jobs_held,
    }


@workers_app.command("list")
def list_workers(
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = None,
) -> None:
    """List registered workers: host, pid, label, workgroup, last seen, leader, jobs held.

    A worker stays listed until the leader's sweep removes it (two leases unseen);
    LAST SEEN says how long ago its last heartbeat was, on this machine's clock.
    """
    workers = operate(dsn, schema, lambda store: store.worker_status())
    if as_json:
        print_json([worker_json(w) for w in workers])
        return
    now = datetime.now(UTC)
    print_table(
        (
            "ID",
            "HOST",
            "PID",
            "LABEL",
            "WORKGROUP",
            "QUEUES",
            "STARTED",
            "LAST SEEN",
            "LEADER",
            "JOBS",
        ),
        (
            (
                w.worker.worker_id,
                w.worker.hostname,
                str(w.worker.pid),
                text(w.worker.worker_label),
                text(w.worker.workgroup_instance),
                ",".join(w.worker.queues) or "-",
                when(w.worker.started_at),
                f"{duration(now - w.worker.last_seen_at)} ago",
                "yes" if w.is_leader else "",
                str(w.jobs_held),
            )
            for w in workers
        ),
        empty="no worker is registered",
        keys=("ID", "QUEUES"),
        optional=("STARTED", "WORKGROUP", "LABEL", "PID", "HOST"),
    )


__all__ = ["worker_json", "workers_app"]
