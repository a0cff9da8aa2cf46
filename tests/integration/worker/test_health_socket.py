"""The health socket and ``taskq health`` on real worker processes, on both drivers.

Every endpoint and every sub-command, on a healthy worker, on one in its
shutdown, on a killed one (whose socket the next worker replaces), and with a
second live worker configured with the same path (refused, the first keeps
serving). The CLI runs as a subprocess, as a Kubernetes exec probe would.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import asyncpg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.integration.worker.actors_fixture import Nap, nap
from tests.integration.worker.metered_actors_fixture import counted, refused
from tests.integration.worker.support import (
    Database,
    WorkerProcess,
    WorkerSpawner,
    child_env,
    eventually,
)
from tests.unit.app.observability.health_fakes import short_dir

from taskq import JobsClient
from taskq.app.cli.health_probe import get

pytestmark = pytest.mark.integration

#: The actors the metrics test runs (no SDK: the file variable is not set).
METERED = "tests.integration.worker.metered_actors_fixture:registry"
#: The labels a series may carry: each has a bounded set of values.
BOUNDED_LABELS = {"actor", "queue", "outcome", "status", "detector", "loop", "reason", "le"}

GAUGE_HELP = (
    "# HELP taskq_active_jobs Currently in-flight jobs on this worker.",
    "# HELP taskq_is_leader 1 if this worker holds the maintenance leader lock.",
    "# HELP taskq_shutdown_phase Current shutdown phase enum value (0=NONE).",
)


@dataclass(frozen=True, slots=True)
class Answer:
    code: int
    out: str
    err: str

    def json(self) -> dict[str, object]:
        value = json.loads(self.out)
        assert isinstance(value, dict)
        return value


async def health(endpoint: str, socket_path: str) -> Answer:
    """``taskq health <endpoint> --socket <path>`` as a separate process."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "taskq.app.cli",
        "health",
        endpoint,
        "--socket",
        socket_path,
        env=child_env({}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode is not None
    answer = Answer(proc.returncode, out.decode(), err.decode())
    # Whatever happened: one line on stderr, never a traceback.
    assert answer.err.count("\n") == 1, answer
    assert "Traceback" not in answer.err, answer
    return answer


def _exists(path: str) -> bool:
    return os.path.lexists(path)


@pytest.fixture
def socket_path() -> Iterator[str]:
    with short_dir() as directory:
        yield os.path.join(directory, "w.sock")


def health_env(db: Database, socket_path: str, **overrides: str) -> dict[str, str]:
    return db.worker_env(
        TASKQ_HEALTH_ENABLED="true", TASKQ_HEALTH_SOCKET_PATH=socket_path, **overrides
    )


async def serving(worker: WorkerProcess, socket_path: str) -> None:
    """Wait until the worker answers ``taskq health ready`` with exit 0."""

    async def ready() -> bool:
        assert worker.returncode is None, worker.output_tail()
        return (await health("ready", socket_path)).code == 0

    await eventually(
        ready, within=60, what="the worker to be ready", interval=0.2, context=worker.output_tail
    )


async def test_a_healthy_worker_answers_every_endpoint(
    db: Database, workers: WorkerSpawner, socket_path: str
) -> None:
    worker = workers.start(health_env(db, socket_path, TASKQ_HEALTH_TASKS_ENABLED="true"))
    await serving(worker, socket_path)
    info = os.lstat(socket_path)
    assert stat.S_ISSOCK(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o600
    (serving_event,) = worker.events("worker-health-serving")
    assert serving_event["socket"] == socket_path

    live = await health("live", socket_path)
    assert (live.code, live.json()) == (0, {"status": "ok"})
    assert live.err == "taskq: health live: healthy (HTTP 200)\n"

    ready = await health("ready", socket_path)
    assert ready.code == 0, ready
    body = ready.json()
    assert body["ready"] is True
    assert body["reasons"] == []
    assert body["redis_configured"] is False
    assert body["active_jobs"] == 0
    assert body["shutdown_phase"] is None
    assert body["shutdown_elapsed_seconds"] is None
    assert body["stale_loops"] == []
    assert body["pg_ping"] == "ok"
    assert isinstance(body["loop_tick_ages"], dict)
    assert "producer" in body["loop_tick_ages"]

    metrics = await health("metrics", socket_path)
    assert metrics.code == 0, metrics
    for line in GAUGE_HELP:
        assert line in metrics.out
    assert "taskq_shutdown_phase 0.0" in metrics.out

    tasks = await health("tasks", socket_path)
    assert tasks.code == 0, tasks
    names = {task["name"] for task in tasks.json()["tasks"]}  # type: ignore[attr-defined]
    assert "taskq-heartbeat" in names, names

    status, _ = await asyncio.to_thread(get, socket_path, "/no/such/endpoint")
    assert status == 404

    worker.send(signal.SIGTERM)
    assert await worker.wait(within=30) == 0, worker.output_tail()
    assert not _exists(socket_path)  # removed at a clean exit
    gone = await health("live", socket_path)
    assert gone.code == 2
    assert "no socket file" in gone.err


async def test_in_shutdown_ready_is_503_with_the_phase_and_live_still_answers(
    db: Database,
    workers: WorkerSpawner,
    client: JobsClient,
    conn: asyncpg.Connection,
    socket_path: str,
) -> None:
    """SIGTERM with a long job in flight: the worker sits in its shutdown (long cancel
    grace); /ready is 503 shutting_down with the phase, /live still 200."""
    env = health_env(
        db,
        socket_path,
        TASKQ_LOCK_LEASE="40",
        TASKQ_CANCELLATION_GRACE_PERIOD="25",
        TASKQ_CLEANUP_GRACE_PERIOD="1",
        TASKQ_TERMINATION_GRACE_PERIOD="40",
    )
    worker = workers.start(env)
    await serving(worker, socket_path)
    job = await client.enqueue(nap, Nap(seconds=120, cooperative=False))

    async def started() -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT count(*) FROM {db.schema}.side_effects WHERE job_id = $1", job.job_id
            )
        )

    await eventually(started, within=30, what="the nap to start", context=worker.output_tail)
    worker.send(signal.SIGTERM)

    async def not_ready() -> Answer | None:
        answer = await health("ready", socket_path)
        return answer if answer.code == 1 else None

    ready = await eventually(
        not_ready, within=30, what="/ready to turn 503", context=worker.output_tail
    )
    assert ready is not None
    assert ready.err == "taskq: health ready: unhealthy (HTTP 503)\n"
    body = ready.json()
    assert body["ready"] is False
    assert "shutting_down" in body["reasons"]  # type: ignore[operator]
    assert body["shutdown_phase"] in {"DRAINING", "CANCELLING"}
    assert isinstance(body["shutdown_elapsed_seconds"], float)
    assert body["active_jobs"] == 1

    live = await health("live", socket_path)
    assert (live.code, live.json()) == (0, {"status": "ok"})
    metrics = await health("metrics", socket_path)
    assert metrics.code == 0
    phase = next(
        line for line in metrics.out.splitlines() if line.startswith("taskq_shutdown_phase ")
    )
    assert float(phase.split()[1]) in {1.0, 2.0}
    assert "taskq_active_jobs 1.0" in metrics.out

    worker.send(signal.SIGTERM)  # the second signal: forced, then out
    assert await worker.wait(within=30) == 0, worker.output_tail()
    assert not _exists(socket_path)


async def test_a_killed_worker_answers_nothing_and_the_next_one_replaces_its_socket(
    db: Database, workers: WorkerSpawner, socket_path: str
) -> None:
    first = workers.start(health_env(db, socket_path))
    await serving(first, socket_path)
    first.send(signal.SIGKILL)
    assert await first.wait(within=30) == -signal.SIGKILL
    assert stat.S_ISSOCK(os.lstat(socket_path).st_mode)  # left behind

    for endpoint in ("live", "ready", "metrics", "tasks"):
        dead = await health(endpoint, socket_path)
        assert dead.code == 2, dead
        assert dead.out == ""
        assert dead.err == (
            f"taskq: health {endpoint}: no worker answers on {socket_path}: "
            "connection refused (a worker that stopped left the socket)\n"
        )

    second = workers.start(health_env(db, socket_path))
    await serving(second, socket_path)
    assert (await health("live", socket_path)).code == 0
    tasks = await health("tasks", socket_path)  # TASKQ_HEALTH_TASKS_ENABLED is off
    assert tasks.code == 1
    assert tasks.err == "taskq: health tasks: unhealthy (HTTP 404)\n"
    second.send(signal.SIGTERM)
    assert await second.wait(within=30) == 0, second.output_tail()


async def test_a_second_live_worker_on_the_same_socket_refuses_to_start(
    db: Database, workers: WorkerSpawner, conn: asyncpg.Connection, socket_path: str
) -> None:
    first = workers.start(health_env(db, socket_path))
    await serving(first, socket_path)
    second = workers.start(health_env(db, socket_path))
    assert await second.wait(within=60) == 1, second.output_tail()
    [line] = [x for x in second.stderr().splitlines() if x.startswith("taskq: ")]
    assert line == (
        f"taskq: TASKQ_HEALTH_SOCKET_PATH={socket_path!r} is in use by another live worker; "
        "give each worker a distinct TASKQ_HEALTH_SOCKET_PATH, or set TASKQ_HEALTH_ENABLED=false"
    )
    # The first keeps its socket, and the second never registered.
    assert (await health("live", socket_path)).code == 0
    assert await conn.fetchval(f"SELECT count(*) FROM {db.schema}.workers") == 1
    first.send(signal.SIGTERM)
    assert await first.wait(within=30) == 0, first.output_tail()


async def test_metrics_on_the_socket_count_what_the_worker_ran(
    db: Database, workers: WorkerSpawner, socket_path: str
) -> None:
    """Three jobs succeed and one fails on a worker serving its socket: /metrics, parsed as
    Prometheus text, counts each attempt by actor, queue and outcome, times four attempts,
    and names no job id in any label."""
    async with JobsClient.connect(settings=db.settings()) as client:
        for n in range(3):
            await client.enqueue(counted, {"n": n})
        await client.enqueue(refused, {"n": 9})
    worker = workers.start(health_env(db, socket_path), registry=METERED)
    await serving(worker, socket_path)

    async def four_counted() -> dict[tuple[str, str, str], float] | None:
        answer = await health("metrics", socket_path)
        assert answer.code == 0, answer
        counts = {
            (s.labels["actor"], s.labels["queue"], s.labels["outcome"]): s.value
            for family in text_string_to_metric_families(answer.out)
            if family.name == "taskq_attempts"
            for s in family.samples
            if s.name == "taskq_attempts_total" and s.value  # every outcome starts at 0
        }
        return counts if sum(counts.values()) == 4 else None

    counts = await eventually(
        four_counted, within=60, what="four attempts on /metrics", context=worker.output_tail
    )
    assert counts == {("counted", "default", "succeeded"): 3, ("refused", "default", "failed"): 1}
    text = (await health("metrics", socket_path)).out
    durations = {
        s.labels["actor"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "taskq_attempt_duration_seconds_count" and s.value
    }
    assert durations == {"counted": 3.0, "refused": 1.0}
    label_names = {
        name
        for family in text_string_to_metric_families(text)
        for s in family.samples
        for name in s.labels
    }
    assert label_names <= BOUNDED_LABELS, label_names - BOUNDED_LABELS  # never a job id
