"""``taskq jobs`` and ``taskq workers`` through the real CLI on real Postgres, both drivers:
a job fails in a real worker, an operator finds it, reads its traceback and retries it."""

from __future__ import annotations

import asyncio
import signal
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, fail_always, nap
from tests.integration.worker.actors_fixture import Nap as NapPayload
from tests.integration.worker.operator_cli import operator_env, taskq
from tests.integration.worker.support import Database, WorkerSpawner, eventually

from taskq import JobsClient, JobStatus

pytestmark = pytest.mark.integration


async def test_find_a_failed_job_read_its_traceback_and_retry_it(
    db: Database, client: JobsClient, workers: WorkerSpawner, tmp_path: Path
) -> None:
    """jobs list finds the failed job, jobs get shows its traceback, jobs retry sends it back
    for one more attempt (a second retry is refused saying why), and the worker runs it."""
    env = operator_env(db)
    handle = await client.enqueue(fail_always, Item(n=7))
    worker = workers.start(db.worker_env(), "--until-idle", "--idle-max-runtime", "60")
    assert await worker.wait(within=60) == 3, worker.output_tail()

    listed = (
        await taskq("jobs", "list", "--status", "failed", "--json", env=env, cwd=tmp_path)
    ).json()
    assert [(j["id"], j["actor"], j["status"], j["attempt"]) for j in listed] == [
        (handle.job_id, "fail_always", "failed", 1)
    ]
    assert listed[0]["queue"] == "default"

    shown = await taskq("jobs", "get", str(handle.job_id), env=env, cwd=tmp_path)
    assert shown.code == 0, shown
    assert "traceback of attempt 1 (failed):" in shown.out
    assert "ValueError: item 7 always fails" in shown.out

    retried = await taskq("jobs", "retry", str(handle.job_id), "--json", env=env, cwd=tmp_path)
    assert (retried.json()["status"], retried.json()["attempt"]) == ("pending", 1)
    again = await taskq("jobs", "retry", str(handle.job_id), env=env, cwd=tmp_path)
    assert (again.code, again.out) == (1, "")
    assert again.err == (
        f"taskq: job {handle.job_id} cannot be retried: it is pending: it is waiting to run "
        "already\n"
    )

    worker = workers.start(db.worker_env(), "--until-idle", "--idle-max-runtime", "60")
    assert await worker.wait(within=60) == 3, worker.output_tail()
    history = (
        await taskq("jobs", "get", str(handle.job_id), "--json", env=env, cwd=tmp_path)
    ).json()
    assert (history["status"], history["attempt"]) == ("failed", 2)
    assert [(a["attempt"], a["outcome"]) for a in history["attempts"]] == [
        (1, "failed"),
        (2, "failed"),
    ]
    assert all("ValueError: item 7" in a["traceback"] for a in history["attempts"])


async def test_two_operators_retrying_one_job_at_once_make_one_attempt(
    db: Database, client: JobsClient, workers: WorkerSpawner, tmp_path: Path
) -> None:
    """Two `taskq jobs retry` processes on one failed job at once: one succeeds, the other
    is refused finding it pending, and the job waits once."""
    env = operator_env(db)
    handle = await client.enqueue(fail_always, Item(n=3))
    worker = workers.start(db.worker_env(), "--until-idle", "--idle-max-runtime", "60")
    assert await worker.wait(within=60) == 3, worker.output_tail()

    runs = await asyncio.gather(
        *(taskq("jobs", "retry", str(handle.job_id), env=env, cwd=tmp_path) for _ in range(2))
    )

    assert sorted(run.code for run in runs) == [0, 1], runs
    (refused,) = [run for run in runs if run.code == 1]
    assert "it is pending: it is waiting to run already" in refused.err
    assert await handle.status() is JobStatus.PENDING
    job = await client.get(handle.job_id)
    assert job is not None
    assert job.attempt == 1


async def test_cancel_and_unknown_ids_with_flags_instead_of_the_environment(
    db: Database, client: JobsClient, tmp_path: Path
) -> None:
    """--dsn and --schema replace the environment; jobs cancel cancels a waiting job; an
    unknown id is one line and exit 1; a job that is no number is a usage error."""
    flags = ("--dsn", db.dsn, "--schema", db.schema)
    env = {"TASKQ_DRIVER": db.driver, "TASKQ_SCHEMA_NAME": "not_this_one"}
    handle = await client.enqueue(fail_always, Item(n=1))

    cancelled = await taskq("jobs", "cancel", str(handle.job_id), *flags, env=env, cwd=tmp_path)
    assert (cancelled.code, cancelled.out) == (0, f"job {handle.job_id}: cancelled\n")
    assert await handle.status() is JobStatus.CANCELLED

    for command in ("get", "cancel", "retry"):
        missing = await taskq("jobs", command, "987654321", *flags, env=env, cwd=tmp_path)
        assert (missing.code, missing.out, missing.err) == (
            1,
            "",
            "taskq: job 987654321 not found\n",
        ), command
    bad = await taskq("jobs", "get", "seven", *flags, env=env, cwd=tmp_path)
    assert bad.code == 1
    assert len(bad.err.splitlines()) == 1


async def test_workers_list_shows_a_live_worker_its_lead_and_its_job(
    db: Database,
    client: JobsClient,
    workers: WorkerSpawner,
    conn: asyncpg.Connection,
    tmp_path: Path,
) -> None:
    """workers list shows a running worker's pid and host, that it leads, and the job it
    holds; settings come from a .env in the working directory."""
    (tmp_path / ".env").write_text(
        "".join(f"{name}={value}\n" for name, value in operator_env(db).items())
    )
    handle = await client.enqueue(nap, NapPayload(seconds=60))
    worker = workers.start(db.worker_env(TASKQ_WORKER_LABEL="cli-test"))
    try:

        async def listed() -> list[dict[str, object]]:
            found: list[dict[str, object]] = (
                await taskq("workers", "list", "--json", env={}, cwd=tmp_path)
            ).json()
            return found if found and found[0]["leader"] and found[0]["jobs_held"] == 1 else []

        (seen,) = await eventually(
            listed,
            within=30,
            what="the worker leading and holding its job",
            interval=0.2,
            context=worker.output_tail,
        )
        assert (seen["pid"], seen["label"]) == (worker.pid, "cli-test")
        assert await handle.status() is JobStatus.RUNNING
        running = await taskq("jobs", "retry", str(handle.job_id), env={}, cwd=tmp_path)
        assert (running.code, running.out) == (1, "")
        assert "it is running: it may still succeed; cancel it first" in running.err
        table = await taskq("workers", "list", env={}, cwd=tmp_path)
        assert table.code == 0
        assert str(worker.pid) in table.out
        assert "yes" in table.out
    finally:
        worker.send(signal.SIGTERM)
        await worker.wait(within=30)


async def test_a_stored_time_past_year_9999_reads_clamped_or_fails_in_one_line(
    db: Database, client: JobsClient, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    """A result_expires_at past year 9999 (written before result_ttl was bounded) reads as
    9999-12-31 in jobs list and get; any other time no reader can load (created_at, by
    hand) fails in one line, exit 1. Before: asyncpg's 80-line OverflowError traceback,
    psycopg's misleading "cannot store a value"."""
    env = operator_env(db)
    handle = await client.enqueue(nap, NapPayload(seconds=0))
    job = str(handle.job_id)
    await conn.execute(
        f"UPDATE \"{db.schema}\".jobs SET result_expires_at = '12978-01-01T00:00:00Z' "
        "WHERE id = $1",
        handle.job_id,
    )
    (listed,) = (await taskq("jobs", "list", "--json", env=env, cwd=tmp_path)).json()
    assert listed["id"] == handle.job_id
    assert (await taskq("jobs", "get", job, "--json", env=env, cwd=tmp_path)).json()["id"]
    assert (await taskq("jobs", "list", env=env, cwd=tmp_path)).code == 0
    read = await client.get(handle.job_id)
    assert read is not None
    assert read.result_expires_at == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)

    await conn.execute(
        f"UPDATE \"{db.schema}\".jobs SET created_at = '12978-01-01T00:00:00Z' WHERE id = $1",
        handle.job_id,
    )
    for args in (("jobs", "list"), ("jobs", "get", job)):
        run = await taskq(*args, env=env, cwd=tmp_path)
        assert (run.code, run.out) == (1, ""), run
        assert run.err.count("\n") == 1, run.err
        assert run.err.startswith("taskq: a stored row holds a time Python cannot read"), run.err
