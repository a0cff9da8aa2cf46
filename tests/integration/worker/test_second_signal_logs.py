"""A second and a third signal to a real ``taskq worker``: the log says what each did."""

from __future__ import annotations

import signal
from typing import Any

import asyncpg
import pytest
from tests.integration.worker.actors_fixture import Item, Nap, nap, stubborn
from tests.integration.worker.support import Database, WorkerProcess, WorkerSpawner, eventually

from taskq import JobsClient

pytestmark = pytest.mark.integration

#: Phases long enough to send a signal in them (the timing rules still hold:
#: cancellation + cleanup = 6 < lease 8 and < termination 15 - 5).
LONG_PHASES = {
    "TASKQ_LOCK_LEASE": "8",
    "TASKQ_TERMINATION_GRACE_PERIOD": "15",
}


async def _job_started(conn: asyncpg.Connection, db: Database, worker: WorkerProcess) -> None:
    async def started() -> bool:
        return bool(await conn.fetchval(f"SELECT count(*) FROM {db.schema}.side_effects"))

    await eventually(started, within=30, what="the job to start", context=worker.output_tail)


async def _phase_reached(worker: WorkerProcess, phase: str) -> None:
    async def reached() -> bool:
        return any(r.get("phase") == phase for r in worker.events("shutdown-phase"))

    await eventually(reached, within=15, what=f"shutdown phase {phase}", context=worker.output_tail)


def _signals(worker: WorkerProcess) -> list[dict[str, Any]]:
    return worker.events("shutdown-signal")


async def test_a_second_sigint_while_cancelling_is_logged_as_forcing(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """SIGINT, then SIGINT again while running jobs are asked to stop: the second
    shutdown-signal record carries signal number 2, count 2 and says the cooperative wait
    was cut short (FORCING), and the FORCING phase record names the second signal."""
    env = db.worker_env(
        **LONG_PHASES, TASKQ_CANCELLATION_GRACE_PERIOD="5", TASKQ_CLEANUP_GRACE_PERIOD="1"
    )
    worker = workers.start(env)
    await client.enqueue(nap, Nap(seconds=60, cooperative=False))
    await _job_started(conn, db, worker)
    worker.send(signal.SIGINT)
    await _phase_reached(worker, "CANCELLING")
    worker.send(signal.SIGINT)
    assert await worker.wait(within=15) == 0, worker.output_tail()

    first, second = _signals(worker)
    assert (first["signal"], first["signum"], first["count"]) == ("SIGINT", 2, 1)
    assert first["action"] == "start"
    assert (second["signal"], second["signum"], second["count"]) == ("SIGINT", 2, 2)
    assert (second["applied_during"], second["phase"], second["action"]) == (
        "CANCELLING",
        "FORCING",
        "forcing",
    )
    assert "FORCING now" in second["effect"], second
    forcing = [r for r in worker.events("shutdown-phase") if r.get("phase") == "FORCING"]
    assert [r["cause"] for r in forcing] == ["second signal"], forcing


async def test_a_second_sigterm_while_forcing_only_counts_and_a_third_exits(
    db: Database, conn: asyncpg.Connection, client: JobsClient, workers: WorkerSpawner
) -> None:
    """In FORCING a second SIGTERM is logged as counted only (the shutdown goes on as it
    was), and the third as the hard exit the worker then makes, with code 1."""
    env = db.worker_env(
        **LONG_PHASES, TASKQ_CANCELLATION_GRACE_PERIOD="1", TASKQ_CLEANUP_GRACE_PERIOD="5"
    )
    worker = workers.start(env)
    await client.enqueue(stubborn, Item(n=1))  # survives its task cancel
    await _job_started(conn, db, worker)
    worker.send(signal.SIGTERM)
    await _phase_reached(worker, "FORCING")
    worker.send(signal.SIGTERM)

    async def counted() -> bool:
        return len(_signals(worker)) == 2

    await eventually(counted, within=10, what="the second signal's record")
    assert worker.returncode is None, worker.output_tail()
    worker.send(signal.SIGTERM)
    assert await worker.wait(within=10) == 1, worker.output_tail()

    _, second, third = _signals(worker)
    assert (second["signum"], second["count"], second["action"]) == (15, 2, "counted")
    assert (second["applied_during"], second["phase"]) == ("FORCING", "FORCING")
    assert "counted only" in second["effect"], second
    assert (third["signum"], third["count"], third["action"]) == (15, 3, "hard-exit")
    assert "exits at once with code 1" in third["effect"], third
    forcing = [r for r in worker.events("shutdown-phase") if r.get("phase") == "FORCING"]
    assert [r["cause"] for r in forcing] == ["cancellation grace elapsed"], forcing
    assert len(worker.events("shutdown-hard-exit")) == 1
