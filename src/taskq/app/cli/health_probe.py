"""What ``taskq health`` does, without Typer: ask a worker's health socket, once.

Made for Kubernetes exec probes, so it is quick and its exit code is the
answer: 0 the endpoint answered healthy (2xx), 1 it answered unhealthy
(e.g. ``/ready`` 503 during a shutdown), 2 no worker answered (no socket
file, connection refused, or no answer within :data:`ANSWER_BUDGET`). The
body goes to stdout, one line to stderr says which of the three it was;
never a traceback.

It loads neither the worker nor the settings model: the socket path is
``--socket``, else ``TASKQ_HEALTH_SOCKET_PATH`` from the environment, else
from ``.env``, else the default, the order the worker reads it in (a test
pins that both agree). HTTP is the standard library's ``http.client`` over an
``AF_UNIX`` socket.
"""

from __future__ import annotations

import http.client
import os
import socket
import stat
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any, Final

#: The whole exchange (connect, ask, read the answer) must fit in this many seconds.
ANSWER_BUDGET: Final = 2.0
#: The worker's default, as ``WorkerSettings.health_socket_path`` has it.
DEFAULT_SOCKET_PATH: Final = "/tmp/taskq_health.sock"
SOCKET_VARIABLE: Final = "TASKQ_HEALTH_SOCKET_PATH"
#: The sub-commands and the paths they ask for.
ENDPOINTS: Final = {"live": "/live", "ready": "/ready", "metrics": "/metrics", "tasks": "/tasks"}

HEALTHY, UNHEALTHY, NO_ANSWER = 0, 1, 2


def probe_command(argv: Sequence[str]) -> int | None:
    """Run ``taskq health <argv>`` when ``argv`` is one of the exact probe forms
    (``ENDPOINT``, ``ENDPOINT --socket PATH``, ``ENDPOINT --socket=PATH``); return its
    exit code. None for anything else (help, a typo): Typer handles those."""
    if not argv or argv[0] not in ENDPOINTS:
        return None
    rest = list(argv[1:])
    socket_path: str | None = None
    if len(rest) == 2 and rest[0] == "--socket" and rest[1] and not rest[1].startswith("-"):
        socket_path = rest[1]
    elif len(rest) == 1 and rest[0].startswith("--socket=") and len(rest[0]) > len("--socket="):
        socket_path = rest[0].removeprefix("--socket=")
    elif rest:
        return None
    return ask(ENDPOINTS[argv[0]], socket_path)


def ask(path: str, socket_path: str | None) -> int:
    """GET ``path`` from the worker; print the body and one line; return the exit code."""
    name = path[1:]
    try:
        where = socket_path if socket_path is not None else default_socket_path()
    except Exception as exc:  # an unreadable .env: still one line, not a traceback
        _say(f"taskq: health {name}: cannot read {SOCKET_VARIABLE} from .env: {_why(exc)}")
        return NO_ANSWER
    if not where or (socket_path is None and not os.path.isabs(where)):
        # The kernel's "Invalid argument" for "" names nothing; a relative path from the
        # settings would depend on the probe's working directory (the worker refuses it).
        origin = "--socket" if socket_path is not None else SOCKET_VARIABLE
        rule = "is empty" if not where else f"is not an absolute path: {where!r}"
        _say(f"taskq: health {name}: {origin} {rule}")
        return NO_ANSWER
    try:
        status, body = get(where, path, budget=ANSWER_BUDGET)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # ValueError: a path the socket module refuses (a NUL byte in it, say).
        _say(f"taskq: health {name}: no worker answers on {where!s}: {_why(exc, where)}")
        return NO_ANSWER
    sys.stdout.write(body if body.endswith("\n") or not body else body + "\n")
    sys.stdout.flush()
    healthy = 200 <= status < 300
    verdict = "healthy" if healthy else "unhealthy"
    _say(f"taskq: health {name}: {verdict} (HTTP {status})")
    return HEALTHY if healthy else UNHEALTHY


def _say(line: str) -> None:
    # One line whatever the text holds: an answer that is not HTTP comes back in the
    # error's message, CR LF and all; control characters are written escaped.
    sys.stderr.write("".join(_printable(char) for char in line) + "\n")
    sys.stderr.flush()


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except (OSError, ValueError):
        return True  # gone meanwhile, or unreadable: leave the refusal as it was said


def _printable(char: str) -> str:
    if char.isprintable():
        return char
    return repr(char)[1:-1] if len(repr(char)) > 3 else f"\\x{ord(char):02x}"


def default_socket_path(env_file: str = ".env") -> str:
    """``TASKQ_HEALTH_SOCKET_PATH`` as the worker resolves it: environment (any case),
    then ``env_file``, then the default."""
    found = _lookup(os.environ.items())
    if found is None and os.path.isfile(env_file):
        from dotenv import dotenv_values  # what the settings model reads .env with

        found = _lookup(
            (key, value)
            for key, value in dotenv_values(env_file, encoding="utf-8").items()
            if value is not None
        )
    return found if found is not None else DEFAULT_SOCKET_PATH


def _lookup(pairs: Iterable[tuple[str, str]]) -> str | None:
    wanted = SOCKET_VARIABLE.lower()
    for key, value in pairs:
        if key.lower() == wanted:
            return value
    return None


class _DeadlineSocket(socket.socket):
    """An ``AF_UNIX`` socket whose every send and receive ends by one deadline.

    A socket timeout bounds each call alone: a server that trickles a byte every
    0.5 s resets it on each byte and holds the probe for as long as it likes. Each
    call here gets only what is left of the whole budget, so connect, send and all
    the reads together end by the deadline.
    """

    def __init__(self, deadline: float) -> None:
        super().__init__(socket.AF_UNIX, socket.SOCK_STREAM)
        self._deadline = deadline

    def _left(self) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the probe's deadline passed")
        self.settimeout(left)

    def connect(self, address: Any) -> None:
        self._left()
        super().connect(address)

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._left()
        super().sendall(data, flags)

    def send(self, data: Any, flags: int = 0) -> int:
        self._left()
        return super().send(data, flags)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        self._left()
        return super().recv(bufsize, flags)

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        # What the response's buffered reader calls for every chunk it reads.
        self._left()
        return super().recv_into(buffer, nbytes, flags)


class _UnixConnection(http.client.HTTPConnection):
    """http.client's HTTP/1.1 over a Unix socket: only the transport differs."""

    def __init__(self, socket_path: str, deadline: float) -> None:
        super().__init__("localhost", timeout=max(0.001, deadline - time.monotonic()))
        self._socket_path = socket_path
        self._deadline = deadline

    def connect(self) -> None:
        sock = _DeadlineSocket(self._deadline)
        try:
            sock.connect(self._socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def get(socket_path: str, path: str, budget: float = ANSWER_BUDGET) -> tuple[int, str]:
    """``(status, body)`` of ``GET path`` on the worker's socket, within ``budget`` seconds
    in all (connect, send and every read share one deadline).

    Raises ``OSError`` (no socket, refused, timed out) or ``http.client.HTTPException``.
    """
    deadline = time.monotonic() + budget
    connection = _UnixConnection(socket_path, deadline)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read().decode("utf-8", errors="replace")
        return response.status, body
    finally:
        connection.close()


def _why(exc: BaseException, where: str = "") -> str:
    if isinstance(exc, ConnectionRefusedError) and not _is_socket(where):
        # connect() on a directory or a regular file is "refused" too: say what it is.
        return "exists and is not a socket (is --socket or TASKQ_HEALTH_SOCKET_PATH right?)"
    if isinstance(exc, FileNotFoundError):
        return "no socket file (is the worker running, with TASKQ_HEALTH_ENABLED=true?)"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (a worker that stopped left the socket)"
    if isinstance(exc, TimeoutError):
        return f"no answer within {ANSWER_BUDGET:g}s"
    if isinstance(exc, PermissionError):
        return "permission denied (the socket is the worker user's; see TASKQ_HEALTH_SOCKET_MODE)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, http.client.HTTPException) and not isinstance(exc, OSError):
        # Something answers, but not a worker's HTTP: as good as no worker (exit 2).
        return f"the answer is not a worker's HTTP ({type(exc).__name__}: {exc})"
    return str(exc) or type(exc).__name__


__all__ = [
    "ANSWER_BUDGET",
    "DEFAULT_SOCKET_PATH",
    "ENDPOINTS",
    "ask",
    "default_socket_path",
    "get",
    "probe_command",
]
