"""Tables on an 80-column terminal keep every identifier whole (ids, names, queues, modes).

Before, rich shrank every column alike: `83c1c9…` for a worker id, `defau…` for a queue,
`round_ro…` for a mode, `WORKG…` for a header; an operator could not copy them.
"""

from __future__ import annotations

import re
import sys
from datetime import timedelta

import pytest
from rich.console import Console
from tests.unit.app.cli.conftest import Cli

from taskq.app.cli import output
from taskq.domain.actor_config import ActorConfig, QueueMode
from taskq.domain.job import NewJob
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import ClaimRequest, WorkerInfo

WORKER_ID = "83c1c9d2-e4f5-4a6b-b7c8-d9e0f1a2b3c4"  # as new_worker_id makes them
HOST = "worker-pool-a-7f9c8d6b5-x2k4q.internal"
QUEUES = ["default", "mail"]
ACTOR = "send_welcome_email_to_new_customer"


@pytest.fixture
def narrow(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """``taskq`` printing tables as on an 80-column terminal."""

    def console() -> Console:
        return Console(
            file=sys.stdout, width=80, markup=False, highlight=False, emoji=False, no_color=True
        )

    monkeypatch.setattr(output, "_console", console)

    async def setup(store: QueueStore) -> None:
        await store.register_worker(
            WorkerInfo(
                worker_id=WORKER_ID,
                hostname=HOST,
                pid=123456,
                queues=QUEUES,
                actors=[ACTOR],
                worker_label="blue-deployment-canary",
                workgroup_instance="workgroup-instance-0001",
            )
        )
        await store.sync_actor_configs([ActorConfig(actor=ACTOR, queue="mail", max_concurrent=5)])
        await store.set_queue_mode("mail", QueueMode.ROUND_ROBIN)
        for _ in range(2):
            await store.enqueue(NewJob(actor=ACTOR, queue="mail"))
        await store.claim(
            ClaimRequest(
                worker_id=WORKER_ID,
                queues=QUEUES,
                actors=[ACTOR],
                limit=1,
                lease=timedelta(seconds=60),
                start_now=1,
            )
        )

    cli.on_store(setup)
    return cli


def _lines_fit(out: str) -> None:
    header = out.split("─")[0]
    assert "…" not in header, out
    assert max(len(line) for line in out.splitlines()) <= 80, out


def test_workers_list_keeps_ids_hosts_and_queues_whole(narrow: Cli) -> None:
    code, out, err = narrow("workers", "list")
    assert (code, err) == (0, "")
    _lines_fit(out)
    assert WORKER_ID in out
    assert ",".join(QUEUES) in out


def test_identifiers_wider_than_the_terminal_print_whole(
    narrow: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the identifiers alone do not fit 80 columns, the table prints wider (the
    terminal wraps its lines) rather than cut one."""
    long_queue = "tenant_" + "x" * 90

    async def setup(store: QueueStore) -> None:
        await store.set_queue_mode(long_queue, QueueMode.ROUND_ROBIN)

    narrow.on_store(setup)
    code, out, err = narrow("queues", "list")
    assert (code, err) == (0, "")
    assert re.search(rf"^{long_queue} +round_robin ", out, re.MULTILINE), out


def test_queues_list_keeps_names_and_modes_whole(narrow: Cli) -> None:
    code, out, err = narrow("queues", "list")
    assert (code, err) == (0, "")
    _lines_fit(out)
    assert re.search(r"^mail +round_robin ", out, re.MULTILINE), out
    assert "default" in out


def test_jobs_list_and_actor_config_list_keep_names_whole(narrow: Cli) -> None:
    code, out, err = narrow("jobs", "list")
    assert (code, err) == (0, "")
    _lines_fit(out)
    assert ACTOR in out
    assert "mail" in out
    assert "running" in out
    code, out, err = narrow("actor-config", "list")
    assert (code, err) == (0, "")
    _lines_fit(out)
    assert ACTOR in out
    assert "mail" in out
