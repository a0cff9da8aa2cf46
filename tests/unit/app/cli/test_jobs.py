"""``taskq jobs`` and ``taskq workers`` on the memory adapter, through the real entry point."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from tests.unit.app.cli.conftest import Cli

from taskq.domain.job import NewJob
from taskq.domain.status import JobStatus
from taskq.ports.queue_store import QueueStore
from taskq.ports.store_params import ClaimRequest, Finish, Heartbeat, WorkerInfo

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "app.py", line 3, in send\n'
    "OSError: [Errno 5] down\n"
)
JOB_FIELDS = {"id", "actor", "queue", "status", "attempt"}


async def failed_job(
    store: QueueStore, actor: str = "send", queue: str = "email", error: str = "[Errno 5] down"
) -> int:
    """A job of ``actor`` that ran once and failed with a traceback."""
    job_id = (await store.enqueue(NewJob(actor=actor, queue=queue, max_attempts=1))).job_id
    (claimed,) = await store.claim(
        ClaimRequest(
            worker_id="w1",
            queues=[queue],
            actors=[actor],
            limit=1,
            lease=timedelta(seconds=60),
            start_now=1,
        )
    )
    await store.finish(
        Finish(
            lease=claimed.lease,
            status=JobStatus.FAILED,
            error=error,
            error_class="OSError",
            traceback=TRACEBACK,
        )
    )
    return job_id


def test_jobs_list_filters_and_prints_json_with_the_stable_fields(cli: Cli) -> None:
    """jobs list --json is one array of job objects, newest first, filtered as asked."""
    failed = cli.on_store(failed_job)
    waiting = cli.on_store(lambda s: s.enqueue(NewJob(actor="resize", queue="images"))).job_id

    code, out, _ = cli("jobs", "list", "--json")
    assert code == 0
    listed = json.loads(out)
    assert [j["id"] for j in listed] == [waiting, failed]
    assert all(set(j) >= JOB_FIELDS for j in listed)
    assert (listed[1]["status"], listed[1]["attempt"], listed[1]["actor"]) == ("failed", 1, "send")

    for flags in (["--status", "failed"], ["--actor", "send"], ["--queue", "email"]):
        code, out, _ = cli("jobs", "list", "--json", *flags)
        assert [j["id"] for j in json.loads(out)] == [failed], flags
    code, out, _ = cli("jobs", "list", "--json", "--limit", "1")
    assert [j["id"] for j in json.loads(out)] == [waiting]


def test_jobs_list_prints_a_table_by_default(cli: Cli) -> None:
    """Without --json jobs list prints a header and one row per job, brackets kept as text."""
    failed = cli.on_store(failed_job)
    code, out, _ = cli("jobs", "list")
    assert code == 0
    header, *rows = [line for line in out.splitlines() if line.strip() and "─" not in line]
    assert header.split()[:5] == ["ID", "ACTOR", "QUEUE", "STATUS", "ATTEMPT"]
    assert rows[0].split()[:5] == [str(failed), "send", "email", "failed", "1/1"]
    assert "[Errno 5] down" in rows[0]
    code, out, _ = cli("jobs", "list", "--actor", "nobody")
    assert (code, out) == (0, "no jobs match\n")


def test_jobs_get_shows_the_attempt_history_and_traceback(cli: Cli) -> None:
    """jobs get prints the job, each attempt and the failed attempt's traceback; --json one
    object with the attempts."""
    job_id = cli.on_store(failed_job)
    code, out, _ = cli("jobs", "get", str(job_id))
    assert code == 0
    assert "status:" in out
    assert "failed" in out
    assert f"traceback of attempt 1 (failed):\n{TRACEBACK}" in out

    code, out, _ = cli("jobs", "get", str(job_id), "--json")
    got = json.loads(out)
    assert set(got) >= JOB_FIELDS
    assert [(a["attempt"], a["outcome"], a["traceback"]) for a in got["attempts"]] == [
        (1, "failed", TRACEBACK)
    ]


def test_jobs_get_shows_a_multi_line_error_on_its_attempt_s_one_row(cli: Cli) -> None:
    # A validation error spans lines: in the cell, the table's width was the whole text's.
    error = "payload does not validate against Q\nm\n  Field required [type=missing]"
    job_id = cli.on_store(lambda store: failed_job(store, error=error))
    code, out, _ = cli("jobs", "get", str(job_id))
    assert code == 0
    table = out[out.index("ATTEMPT") :].split("\n\ntraceback")[0].splitlines()
    rule, row = table[1], table[2]
    assert row.startswith("1 ")
    assert row.rstrip().endswith(
        "OSError: payload does not validate against Q m Field required [type=missing]"
    )
    assert len(table) == 3
    assert len(rule.rstrip()) <= len(row.rstrip())


@pytest.mark.parametrize("command", ["get", "cancel", "retry"])
def test_an_unknown_job_is_one_line_and_exit_1(cli: Cli, command: str) -> None:
    """jobs get|cancel|retry of an id no job has: one line naming it, exit 1, no traceback."""
    code, out, err = cli("jobs", command, "999")
    assert (code, out) == (1, "")
    assert err == "taskq: job 999 not found\n"


def test_jobs_retry_sends_a_failed_job_back_and_refuses_a_pending_one(cli: Cli) -> None:
    """jobs retry makes a failed job pending (history kept); retrying it again is refused
    with the reason, exit 1."""
    job_id = cli.on_store(failed_job)
    code, out, _ = cli("jobs", "retry", str(job_id))
    assert (code, out) == (0, f"job {job_id}: pending again; its next attempt is attempt 2\n")
    job = cli.on_store(lambda s: s.get(job_id))
    assert job is not None
    assert job.status is JobStatus.PENDING
    assert len(cli.on_store(lambda s: s.attempts(job_id))) == 1

    code, out, err = cli("jobs", "retry", str(job_id))
    assert (code, out) == (1, "")
    assert err == (
        f"taskq: job {job_id} cannot be retried: it is pending: it is waiting to run already\n"
    )


def test_jobs_cancel_cancels_a_waiting_job(cli: Cli) -> None:
    """jobs cancel of a pending job cancels it; --json says the status; a second cancel
    reports the job already ended."""
    job_id = cli.on_store(lambda s: s.enqueue(NewJob(actor="a"))).job_id
    code, out, _ = cli("jobs", "cancel", str(job_id), "--json")
    assert (code, json.loads(out)) == (0, {"id": job_id, "status": "cancelled"})
    code, out, _ = cli("jobs", "cancel", str(job_id))
    assert (code, out) == (0, f"job {job_id}: already ended cancelled; nothing to cancel\n")


def test_a_job_id_that_is_no_number_is_a_usage_error(cli: Cli) -> None:
    """jobs get abc: one usage line, exit 1."""
    code, _, err = cli("jobs", "get", "abc")
    assert code == 1
    assert err.startswith("taskq: jobs get: Invalid value for 'ID'")


def test_workers_list_shows_leader_jobs_held_and_workgroup(cli: Cli) -> None:
    """workers list --json: one object per worker with its host, pid, label, workgroup
    instance, leader flag and jobs held; the table shows the same."""

    async def setup(store: QueueStore) -> None:
        await store.register_worker(
            WorkerInfo(
                worker_id="w1",
                hostname="box",
                pid=7,
                queues=["email"],
                actors=["send"],
                worker_label="mail",
                workgroup_instance="wg-9",
            )
        )
        await store.heartbeat(
            Heartbeat(worker_id="w1", lease=timedelta(seconds=60), is_leader=True)
        )
        await store.enqueue(NewJob(actor="send", queue="email"))
        await store.claim(
            ClaimRequest(
                worker_id="w1", queues=["email"], actors=["send"], limit=1, lease=timedelta(60)
            )
        )

    cli.on_store(setup)
    code, out, _ = cli("workers", "list", "--json")
    assert code == 0
    (worker,) = json.loads(out)
    assert {k: worker[k] for k in ("id", "host", "pid", "label", "workgroup_instance")} == {
        "id": "w1",
        "host": "box",
        "pid": 7,
        "label": "mail",
        "workgroup_instance": "wg-9",
    }
    assert (worker["leader"], worker["jobs_held"], worker["queues"]) == (True, 1, ["email"])
    assert worker["last_seen_at"].endswith("+00:00")

    code, out, _ = cli("workers", "list")
    row = next(line for line in out.splitlines() if line.strip().startswith("w1"))
    assert row.split()[:5] == ["w1", "box", "7", "mail", "wg-9"]
    assert "yes" in row


def test_workers_list_without_workers(cli: Cli) -> None:
    """No registered worker: one line saying so, exit 0; --json an empty array."""
    assert cli("workers", "list") == (0, "no worker is registered\n", "")
    assert cli("workers", "list", "--json")[1] == "[]\n"


def test_a_custom_store_without_the_operator_role_is_named_in_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TASKQ_DRIVER factory whose store lacks JobAdmin's methods: the command says which
    methods are missing, in one line, exit 1."""
    monkeypatch.setenv("TASKQ_DRIVER", "tests.unit.app.cli.memory_driver:ports_without_admin")
    code, out, err = cli("jobs", "list")
    assert (code, out) == (1, "")
    (line,) = err.splitlines()
    assert "does not implement QueueStore: missing list_jobs, retry_job, worker_status" in line
