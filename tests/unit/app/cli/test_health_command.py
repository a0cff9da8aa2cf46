"""``taskq health``: exit codes, output, the socket it asks, and a quick start."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from tests.unit.app.observability.health_fakes import DRAINING, FakeHealth, short_dir

from taskq.app.cli import health_probe
from taskq.app.cli.health_probe import DEFAULT_SOCKET_PATH, ask, default_socket_path, probe_command
from taskq.app.observability.health_server import HealthConfig, HealthServer
from taskq.app.settings import WorkerSettings
from taskq.domain.errors import ConfigurationError


@pytest.fixture
def socket_dir() -> Iterator[str]:
    with short_dir() as path:
        yield path


@pytest.fixture
def serving(socket_dir: str) -> Iterator[tuple[HealthServer, FakeHealth]]:
    """A server over a fake worker whose loop runs in a thread of its own."""
    loop = asyncio.new_event_loop()
    import threading

    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    worker = FakeHealth(loop)
    config = HealthConfig(socket_path=os.path.join(socket_dir, "h.sock"), pg_ping_timeout=0.2)
    server = HealthServer(worker, CollectorRegistry(), config)
    server.start()
    try:
        yield server, worker
    finally:
        server.stop()
        loop.call_soon_threadsafe(loop.stop)
        runner.join(timeout=5)
        loop.close()


def test_healthy_prints_the_body_and_exits_0(
    serving: tuple[HealthServer, FakeHealth], capsys: pytest.CaptureFixture[str]
) -> None:
    server, _ = serving
    assert ask("/live", server.path) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"status": "ok"}
    assert err == "taskq: health live: healthy (HTTP 200)\n"


def test_an_unhealthy_answer_exits_1_with_the_body(
    serving: tuple[HealthServer, FakeHealth], capsys: pytest.CaptureFixture[str]
) -> None:
    server, worker = serving
    worker.state = DRAINING
    assert ask("/ready", server.path) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["reasons"] == ["shutting_down"]
    assert err == "taskq: health ready: unhealthy (HTTP 503)\n"


def test_tasks_switched_off_is_unhealthy_404(
    serving: tuple[HealthServer, FakeHealth], capsys: pytest.CaptureFixture[str]
) -> None:
    server, _ = serving
    assert ask("/tasks", server.path) == 1
    assert capsys.readouterr().err == "taskq: health tasks: unhealthy (HTTP 404)\n"


def test_no_socket_file_exits_2(socket_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = os.path.join(socket_dir, "none.sock")
    assert ask("/live", path) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"taskq: health live: no worker answers on {path}: no socket file " + (
        "(is the worker running, with TASKQ_HEALTH_ENABLED=true?)\n"
    )


def test_a_socket_nobody_listens_on_exits_2(
    socket_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = os.path.join(socket_dir, "dead.sock")
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(path)
    leftover.close()
    assert ask("/ready", path) == 2
    assert "connection refused" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["directory", "file"])
def test_a_path_that_is_not_a_socket_says_so(
    kind: str, socket_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """connect() on a directory or a file is "refused": not a stopped worker's socket."""
    path = os.path.join(socket_dir, kind)
    if kind == "directory":
        os.mkdir(path)
    else:
        Path(path).write_text("not a socket")
    assert ask("/live", path) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"taskq: health live: no worker answers on {path}: exists and is not")
    assert "refused" not in err


def test_an_empty_socket_setting_names_the_variable(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TASKQ_HEALTH_SOCKET_PATH", "")
    assert ask("/live", None) == 2
    assert capsys.readouterr().err == "taskq: health live: TASKQ_HEALTH_SOCKET_PATH is empty\n"
    assert ask("/live", "") == 2
    assert capsys.readouterr().err == "taskq: health live: --socket is empty\n"


def test_a_relative_socket_setting_is_refused_as_the_worker_refuses_it(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe would depend on its working directory; the worker refuses it at start."""
    monkeypatch.setenv("TASKQ_HEALTH_SOCKET_PATH", "run/h.sock")
    assert ask("/live", None) == 2
    assert capsys.readouterr().err == (
        "taskq: health live: TASKQ_HEALTH_SOCKET_PATH is not an absolute path: 'run/h.sock'\n"
    )
    with pytest.raises(ConfigurationError, match="TASKQ_HEALTH_SOCKET_PATH: must be an absolute"):
        WorkerSettings.load_from_dict({"health_socket_path": "run/h.sock"})


def test_a_worker_that_never_answers_exits_2_within_the_budget(
    socket_dir: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connected (the backlog accepts) but no answer: given up after the budget."""
    monkeypatch.setattr(health_probe, "ANSWER_BUDGET", 0.3)
    path = os.path.join(socket_dir, "mute.sock")
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(path)
    mute.listen(1)
    try:
        assert ask("/live", path) == 2
    finally:
        mute.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no answer within" in err


def _answer_with(path: str, answer: bytes, every: float) -> threading.Thread:
    """A server on ``path`` that answers one request with ``answer``, a byte every
    ``every`` seconds (all at once when 0), then closes."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def serve() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn, contextlib.suppress(OSError):  # the probe hung up: done
                conn.recv(65536)
                if not every:
                    conn.sendall(answer)
                    return
                for byte in answer:
                    conn.sendall(bytes([byte]))
                    time.sleep(every)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_a_trickling_server_cannot_stretch_the_budget(
    socket_dir: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One deadline over connect, send and every read: a byte every 0.05 s resets a
    per-read timeout forever, but the probe still gives up when the budget is spent."""
    monkeypatch.setattr(health_probe, "ANSWER_BUDGET", 0.3)
    path = os.path.join(socket_dir, "slow.sock")
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 100
    server = _answer_with(path, answer, every=0.05)
    began = time.monotonic()
    assert ask("/live", path) == 2
    assert time.monotonic() - began < 0.6
    err = capsys.readouterr().err
    assert err == f"taskq: health live: no worker answers on {path}: no answer within 0.3s\n"
    server.join(10.0)


def test_an_answer_that_is_not_http_is_one_line_and_exit_2(
    socket_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Something answers, but not a worker: exit 2, and its CR LF never splits the line."""
    path = os.path.join(socket_dir, "junk.sock")
    server = _answer_with(path, b"NOT HTTP\r\n", every=0)
    assert ask("/live", path) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"taskq: health live: no worker answers on {path}: the answer is not")
    assert "\\r\\n" in err  # escaped, as written
    server.join(10.0)


# -- the socket path, as the worker resolves it ------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in list(os.environ):
        if name.upper().startswith("TASKQ_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("environ", "dotenv", "expected"),
    [
        ({}, None, DEFAULT_SOCKET_PATH),
        ({"TASKQ_HEALTH_SOCKET_PATH": "/run/a.sock"}, None, "/run/a.sock"),
        ({"taskq_health_socket_path": "/run/lower.sock"}, None, "/run/lower.sock"),
        ({}, "TASKQ_HEALTH_SOCKET_PATH=/run/file.sock\n", "/run/file.sock"),
        ({}, "export TASKQ_HEALTH_SOCKET_PATH='/run/q.sock'\n", "/run/q.sock"),
        (
            {"TASKQ_HEALTH_SOCKET_PATH": "/run/env.sock"},
            "TASKQ_HEALTH_SOCKET_PATH=/run/file.sock\n",
            "/run/env.sock",
        ),
    ],
)
def test_default_socket_is_the_one_the_worker_binds(
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str],
    dotenv: str | None,
    expected: str,
) -> None:
    """No --socket: the path the worker's settings give, without loading the settings."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    if dotenv is not None:
        (clean_env / ".env").write_text(dotenv)
    assert default_socket_path() == expected
    assert WorkerSettings.load().health_socket_path == expected


def test_the_probe_loads_neither_settings_nor_worker_nor_drivers(socket_dir: str) -> None:
    """``taskq health`` imports no database driver, no worker runtime, no settings model,
    no server and not even Typer: an exec probe pays only for what it uses."""
    probe = (
        "import json, sys\n"
        "from taskq.app.cli import main\n"
        "try:\n"
        f"    main(['health', 'live', '--socket', {os.path.join(socket_dir, 'x.sock')!r}])\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('asyncpg', 'psycopg', "
        "'redis', 'pydantic', 'pydantic_settings', 'aiohttp', 'prometheus_client', "
        "'opentelemetry', 'typer', 'click') or "
        "m.startswith(('taskq.app.worker', 'taskq.app.settings', 'taskq.app.actors', "
        "'taskq.adapters', 'taskq.app.composition')))\n"
        "print(json.dumps([code, heavy]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [2, []], done.stderr


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["live"], ("/live", None)),
        (["ready", "--socket", "/run/w.sock"], ("/ready", "/run/w.sock")),
        (["metrics", "--socket=/run/w.sock"], ("/metrics", "/run/w.sock")),
        (["tasks"], ("/tasks", None)),
        (["--help"], None),
        (["live", "--help"], None),
        (["lve"], None),
        (["live", "--socket"], None),
        (["live", "--socket", "--help"], None),
        (["live", "--socket="], None),
        (["live", "--socket", "a", "b"], None),
        ([], None),
    ],
)
def test_only_the_exact_probe_forms_skip_typer(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], expected: tuple[str, str | None] | None
) -> None:
    asked: list[tuple[str, str | None]] = []

    def fake_ask(path: str, socket_path: str | None) -> int:
        asked.append((path, socket_path))
        return 0

    monkeypatch.setattr(health_probe, "ask", fake_ask)
    code = probe_command(argv)
    assert (asked[0] if asked else None) == expected
    assert code == (0 if expected is not None else None)


def test_typer_and_the_fast_path_answer_alike(
    socket_dir: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """Help and the sub-commands through Typer, the exact forms without: same answer."""
    from taskq.app.cli import main
    from taskq.app.cli.root import run

    path = os.path.join(socket_dir, "none.sock")
    answers = []
    for entry in (main, run):
        with pytest.raises(SystemExit) as exited:
            entry(["health", "live", "--socket", path])
        answers.append((exited.value.code, capfd.readouterr()))
    assert answers[0] == answers[1]
    assert answers[0][0] == 2
    with pytest.raises(SystemExit) as exited:
        main(["health", "live", "--help"])
    assert exited.value.code == 0
    assert "--socket" in capfd.readouterr().out


@pytest.mark.parametrize("args", [["health"], ["health", "--socket", "/tmp/x.sock"]])
def test_a_missing_sub_command_is_a_usage_error_not_help_and_exit_0(
    args: list[str], capfd: pytest.CaptureFixture[str]
) -> None:
    """A mistyped exec probe (["taskq", "health"]) must fail, not pass on the help."""
    from taskq.app.cli import main

    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 1
    out, err = capfd.readouterr()
    assert out == ""
    assert err.startswith("taskq: health: ")
    assert err.count("\n") == 1


def test_an_unreadable_env_file_is_one_line_and_exit_2(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (clean_env / ".env").write_bytes(b"TASKQ_HEALTH_SOCKET_PATH=/run/\xff.sock\n")
    assert ask("/live", None) == 2
    err = capsys.readouterr().err
    assert err.startswith("taskq: health live: cannot read TASKQ_HEALTH_SOCKET_PATH from .env: ")
    assert err.count("\n") == 1


def test_a_socket_path_the_kernel_refuses_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert ask("/live", "/tmp/nul\x00byte.sock") == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert ask("/live", "/tmp/" + "x" * 200 + ".sock") == 2  # too long for AF_UNIX
    assert "no worker answers" in capsys.readouterr().err
