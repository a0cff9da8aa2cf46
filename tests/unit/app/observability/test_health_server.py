"""The health server over a fake worker: each endpoint, each cause of a 503, the socket."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter
from tests.unit.app.observability.health_fakes import (
    DRAINING,
    HEALTHY,
    STALE,
    FakeHealth,
    short_dir,
)

from taskq.app.cli.health_probe import _UnixConnection, get
from taskq.app.observability import health_server
from taskq.app.observability.gauges import register_worker_gauges
from taskq.app.observability.health_server import HealthConfig, HealthServer
from taskq.app.observability.health_socket import SocketBusy
from taskq.domain.errors import ConfigurationError


@pytest.fixture
def socket_dir() -> Iterator[str]:
    with short_dir() as path:
        yield path


def _config(socket_dir: str, **values: object) -> HealthConfig:
    return HealthConfig(
        socket_path=os.path.join(socket_dir, "h.sock"),
        pg_ping_timeout=float(values.pop("pg_ping_timeout", 0.2)),  # type: ignore[arg-type]
        **values,  # type: ignore[arg-type]
    )


@pytest.fixture
async def worker() -> FakeHealth:
    """The fake worker, on the test's own loop (which stays free while requests run)."""
    return FakeHealth(asyncio.get_running_loop())


@pytest.fixture
async def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def idle_worker() -> Iterator[FakeHealth]:
    """A fake worker on a loop that never runs (tests of the socket only)."""
    loop = asyncio.new_event_loop()
    try:
        yield FakeHealth(loop)
    finally:
        loop.close()


@pytest.fixture
async def server(
    worker: FakeHealth, registry: CollectorRegistry, socket_dir: str
) -> AsyncIterator[HealthServer]:
    register_worker_gauges(registry, worker.snapshot)
    health = HealthServer(worker, registry, _config(socket_dir, tasks_enabled=True))
    health.start()
    try:
        yield health
    finally:
        await asyncio.to_thread(health.stop)


async def _get(server: HealthServer, path: str) -> tuple[int, str]:
    # From another thread, as a probe would: this loop is the worker's and must stay free.
    return await asyncio.to_thread(get, server.path, path)


async def _get_json(server: HealthServer, path: str) -> tuple[int, dict[str, object]]:
    status, body = await _get(server, path)
    return status, json.loads(body)


async def test_live_answers_ok_when_the_worker_loop_runs_its_callback(
    server: HealthServer,
) -> None:
    assert await _get_json(server, "/live") == (200, {"status": "ok"})


def test_live_is_503_unresponsive_when_the_worker_loop_never_runs_it(socket_dir: str) -> None:
    """A loop that runs nothing (as a blocked one) gets /live 503, and /ready says the
    loop is unresponsive rather than blaming Postgres for a ping the loop never ran:
    the server's own thread still answers both."""
    wedged = asyncio.new_event_loop()  # not running: what is posted to it waits
    try:
        health = HealthServer(FakeHealth(wedged), CollectorRegistry(), _config(socket_dir))
        health.start()
        try:
            status, body = get(health.path, "/live")
            assert (status, json.loads(body)) == (503, {"status": "unresponsive"})
            status, body = get(health.path, "/ready")
            assert status == 503
            ready = json.loads(body)
            assert ready["reasons"] == ["unresponsive"]
            assert ready["pg_ping"] == "loop_blocked"
            assert "blocked" in ready["pg_ping_error"]
        finally:
            health.stop()
    finally:
        # Unwedged: what the server posted runs (the ping, cancelled at once).
        wedged.run_until_complete(asyncio.sleep(0.01))
        wedged.close()


async def test_ready_is_200_with_the_guides_fields_when_all_is_well(
    server: HealthServer, worker: FakeHealth
) -> None:
    status, body = await _get_json(server, "/ready")
    assert status == 200
    assert body == {
        "ready": True,
        "redis_configured": False,
        "active_jobs": 3,
        "is_leader": True,
        "shutdown_phase": None,
        "shutdown_elapsed_seconds": None,
        "loop_tick_ages": {"heartbeat": 0.25, "producer": 1.0},
        "stale_loops": [],
        "pg_ping": "ok",
        "reasons": [],
    }
    assert worker.pings == 1


async def test_ready_is_503_shutting_down_with_the_phase_and_no_ping(
    server: HealthServer, worker: FakeHealth
) -> None:
    worker.state = DRAINING
    status, body = await _get_json(server, "/ready")
    assert status == 503
    assert body["ready"] is False
    assert body["reasons"] == ["shutting_down"]
    assert body["shutdown_phase"] == "DRAINING"
    assert body["shutdown_elapsed_seconds"] == 2.5
    assert body["pg_ping"] == "skipped"
    assert worker.pings == 0
    assert (await _get(server, "/live"))[0] == 200  # a leaving worker is still alive


async def test_ready_is_503_with_stale_loops_named(
    server: HealthServer, worker: FakeHealth
) -> None:
    worker.state = STALE
    status, body = await _get_json(server, "/ready")
    assert status == 503
    assert body["reasons"] == ["stale_loops"]
    assert body["stale_loops"] == ["heartbeat"]
    assert body["loop_tick_ages"] == {"heartbeat": 99.0}


async def test_ready_is_503_while_the_worker_is_starting(
    server: HealthServer, worker: FakeHealth
) -> None:
    from dataclasses import replace

    worker.state = replace(HEALTHY, started=False)
    status, body = await _get_json(server, "/ready")
    assert (status, body["reasons"]) == (503, ["starting"])


async def test_ready_is_503_when_the_ping_fails_and_says_how(
    server: HealthServer, worker: FakeHealth
) -> None:
    worker.ping_behaviour = "fail"
    status, body = await _get_json(server, "/ready")
    assert status == 503
    assert body["reasons"] == ["pg_ping_failed"]
    assert body["pg_ping"] == "failed"
    assert "ConnectionResetError" in str(body["pg_ping_error"])


async def test_a_slow_ping_is_a_timeout_left_to_finish_and_never_doubled(
    server: HealthServer, worker: FakeHealth
) -> None:
    """A ping that misses its timeout is a 503 after the timeout, but is not cancelled
    (that can cost the pool its connection), and later /ready requests join it rather
    than start more: the worker's pool carries one ping at most."""
    worker.ping_behaviour = "hang"
    for _ in range(3):
        status, body = await _get_json(server, "/ready")
        assert (status, body["reasons"]) == (503, ["pg_ping_timeout"])
        assert body["pg_ping"] == "timeout"
        assert body["pg_ping_error"] == "no answer within 0.2s"
    assert worker.pings == 1
    assert not worker.ping_cancelled
    worker.ping_behaviour = "ok"
    worker.release()  # it answers at last; the next /ready asks again
    answers = []
    for _ in range(50):
        answers.append((await _get(server, "/ready"))[0])
        if answers[-1] == 200:
            break
    assert answers[-1] == 200, answers
    assert worker.pings == 2
    assert not worker.ping_cancelled


async def test_a_ping_past_its_give_up_is_cancelled_and_the_next_one_starts(
    server: HealthServer, worker: FakeHealth, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health_server, "_give_up_after", lambda timeout: 0.3)
    worker.ping_behaviour = "hang"
    assert (await _get(server, "/ready"))[0] == 503
    for _ in range(200):  # cancelled on this loop once 0.3 s passed
        if worker.ping_cancelled:
            break
        await asyncio.sleep(0.01)
    assert worker.ping_cancelled
    worker.ping_behaviour = "ok"
    answers = []
    for _ in range(50):
        answers.append((await _get(server, "/ready"))[0])
        if answers[-1] == 200:
            break
    assert answers[-1] == 200, answers
    assert worker.pings == 2


async def test_every_cause_is_listed_at_once(server: HealthServer, worker: FakeHealth) -> None:
    from dataclasses import replace

    worker.state = replace(DRAINING, started=False, stale_loops=("leader.sweep",))
    status, body = await _get_json(server, "/ready")
    assert status == 503
    assert body["reasons"] == ["starting", "shutting_down", "stale_loops"]


async def test_metrics_renders_the_registry_whatever_is_on_it(
    server: HealthServer, worker: FakeHealth, registry: CollectorRegistry
) -> None:
    """The guide's three gauges (read at scrape time) and a collector the server knows
    nothing of, in Prometheus text format 0.0.4."""
    extra = Counter("taskq_test_things", "Things a test counted.", registry=registry)
    extra.inc(2)
    worker.state = DRAINING
    status, body = await _get(server, "/metrics")
    assert status == 200
    assert (
        "# HELP taskq_active_jobs Currently in-flight jobs on this worker.\n"
        "# TYPE taskq_active_jobs gauge\n"
        "taskq_active_jobs 3.0\n"
        "# HELP taskq_is_leader 1 if this worker holds the maintenance leader lock.\n"
        "# TYPE taskq_is_leader gauge\n"
        "taskq_is_leader 1.0\n"
        "# HELP taskq_shutdown_phase Current shutdown phase enum value (0=NONE).\n"
        "# TYPE taskq_shutdown_phase gauge\n"
        "taskq_shutdown_phase 1.0\n"
    ) in body
    assert "taskq_test_things_total 2.0" in body
    headers = await asyncio.to_thread(_raw_headers, server.path, "/metrics")
    assert "content-type: text/plain; version=0.0.4; charset=utf-8" in headers


async def test_tasks_serves_the_dump_as_json(server: HealthServer, worker: FakeHealth) -> None:
    status, body = await _get_json(server, "/tasks")
    assert status == 200
    assert body["tasks"] == [
        {"name": "taskq-heartbeat", "coroutine": "run_heartbeat", "frames": ["h.py:1"]}
    ]
    assert isinstance(body["loop_thread_stack"], list)


def _block_the_loop_thread(release: threading.Event) -> None:
    release.wait(10.0)  # as time.sleep in an async def actor: the loop thread is held


def test_tasks_shows_where_a_blocked_loop_thread_is(socket_dir: str) -> None:
    """The running task shows only its await site; the loop thread's own stack names
    the sync call that blocks it (code locations, never locals)."""
    loop = asyncio.new_event_loop()
    release = threading.Event()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    worker = FakeHealth(loop)
    worker.loop_thread_id = runner.ident
    health = HealthServer(worker, CollectorRegistry(), _config(socket_dir, tasks_enabled=True))
    health.start()
    try:
        loop.call_soon_threadsafe(_block_the_loop_thread, release)
        time.sleep(0.1)
        status, body = get(health.path, "/tasks")
        assert status == 200
        stack = json.loads(body)["loop_thread_stack"]
        assert stack[-1].endswith("in wait")  # threading.Event.wait, at the bottom
        assert any(line.endswith(" in _block_the_loop_thread") for line in stack)
        assert all(" in " in line and "release" not in line for line in stack)  # no locals
    finally:
        release.set()
        health.stop()
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5.0)
        loop.close()


async def test_tasks_is_404_unless_enabled(
    worker: FakeHealth, registry: CollectorRegistry, socket_dir: str
) -> None:
    health = HealthServer(worker, registry, _config(socket_dir))
    health.start()
    try:
        assert (await _get(health, "/tasks"))[0] == 404
        assert worker.dumps == 0
    finally:
        await asyncio.to_thread(health.stop)


@pytest.mark.parametrize("path", ["/", "/nope", "/live/x", "/metrics.txt"])
async def test_unknown_paths_are_404(server: HealthServer, path: str) -> None:
    assert (await _get(server, path))[0] == 404


def test_socket_is_0600_and_removed_at_stop(idle_worker: FakeHealth, socket_dir: str) -> None:
    health = HealthServer(idle_worker, CollectorRegistry(), _config(socket_dir))
    health.start()
    try:
        info = os.lstat(health.path)
        assert stat.S_ISSOCK(info.st_mode)
        assert stat.S_IMODE(info.st_mode) == 0o600
    finally:
        health.stop()
    assert not os.path.exists(health.path)


def test_socket_mode_0660_when_configured(idle_worker: FakeHealth, socket_dir: str) -> None:
    health = HealthServer(idle_worker, CollectorRegistry(), _config(socket_dir, socket_mode=0o660))
    health.start()
    try:
        assert stat.S_IMODE(os.lstat(health.path).st_mode) == 0o660
    finally:
        health.stop()


async def test_a_live_servers_socket_is_never_taken(
    server: HealthServer, worker: FakeHealth, registry: CollectorRegistry, socket_dir: str
) -> None:
    second = HealthServer(worker, registry, _config(socket_dir))
    with pytest.raises(SocketBusy, match=r"TASKQ_HEALTH_SOCKET_PATH=.*another live worker"):
        second.start()
    assert (await _get(server, "/live"))[0] == 200  # the first one still serves


async def test_a_dead_servers_socket_is_replaced(
    worker: FakeHealth, registry: CollectorRegistry, socket_dir: str
) -> None:
    """A socket file nothing listens on (a killed worker's) is removed and bound anew."""
    path = os.path.join(socket_dir, "h.sock")
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(path)
    leftover.close()  # the file stays, nothing listens: connect is refused
    health = HealthServer(worker, registry, _config(socket_dir))
    health.start()
    try:
        assert await _get_json(health, "/live") == (200, {"status": "ok"})
    finally:
        await asyncio.to_thread(health.stop)


def test_a_file_that_is_not_a_socket_is_never_removed(
    idle_worker: FakeHealth, socket_dir: str
) -> None:
    path = os.path.join(socket_dir, "h.sock")
    with open(path, "w") as file:
        file.write("precious")
    with pytest.raises(ConfigurationError, match="exists and is not a socket"):
        HealthServer(idle_worker, CollectorRegistry(), _config(socket_dir)).start()
    with open(path) as file:
        assert file.read() == "precious"


def test_stop_leaves_a_socket_that_is_no_longer_ours(
    idle_worker: FakeHealth, socket_dir: str
) -> None:
    health = HealthServer(idle_worker, CollectorRegistry(), _config(socket_dir))
    health.start()
    os.unlink(health.path)
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(health.path)  # someone else's now
    try:
        health.stop()
        assert os.path.exists(health.path)
    finally:
        other.close()


def _raw_headers(socket_path: str, path: str) -> str:
    connection = _UnixConnection(socket_path, time.monotonic() + 2.0)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return "\n".join(f"{k.lower()}: {v}" for k, v in response.getheaders())
    finally:
        connection.close()


def test_a_closed_worker_loop_is_unresponsive_and_not_ready(socket_dir: str) -> None:
    """The worker's loop already closed (the worker is leaving): nothing to post to."""
    closed = asyncio.new_event_loop()
    closed.close()
    health = HealthServer(FakeHealth(closed), CollectorRegistry(), _config(socket_dir))
    health.start()
    try:
        status, body = get(health.path, "/live")
        assert (status, json.loads(body)) == (503, {"status": "unresponsive"})
        status, body = get(health.path, "/ready")
        assert status == 503
        ready = json.loads(body)
        assert ready["reasons"] == ["unresponsive", "pg_ping_failed"]  # as /live says
        assert ready["pg_ping_error"] == "the worker's event loop is closed"
    finally:
        health.stop()


def test_a_path_that_cannot_be_bound_names_the_variable(
    idle_worker: FakeHealth, socket_dir: str
) -> None:
    missing = os.path.join(socket_dir, "no", "such", "dir", "h.sock")
    config = HealthConfig(socket_path=missing, pg_ping_timeout=0.2)
    with pytest.raises(ConfigurationError) as refused:
        HealthServer(idle_worker, CollectorRegistry(), config).start()
    assert str(refused.value) == (
        f"TASKQ_HEALTH_SOCKET_PATH={missing!r}: cannot serve the health socket there "
        "(No such file or directory); set a writable path or TASKQ_HEALTH_ENABLED=false"
    )
