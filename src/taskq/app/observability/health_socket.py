"""The health server's Unix socket: claimed safely, created 0600, removed at exit.

A socket file is only ever replaced when nothing listens on it (a worker that
was killed left it behind): :func:`claim` first connects to it, and a worker
that answers keeps its socket; the newcomer gets :class:`SocketBusy` and
refuses to start. The mode is set before ``listen()``, so no one can connect
while the file still has the umask's mode.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from dataclasses import dataclass
from typing import Final

from taskq.domain.errors import ConfigurationError

#: How long a connect to an existing socket may take before it counts as live.
PROBE_TIMEOUT: Final = 1.0
#: The default mode: the worker's own user only.
DEFAULT_MODE: Final = 0o600


class SocketBusy(ConfigurationError):
    """Another live process serves on the configured socket path."""


@dataclass(frozen=True, slots=True)
class ClaimedSocket:
    """A bound, listening socket and the file's identity (to remove only our own)."""

    sock: socket.socket
    path: str
    inode: int

    def release(self) -> None:
        """Close the socket; remove the file if it is still the one we bound."""
        self.sock.close()
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self.inode:
                os.unlink(self.path)


def claim(path: str, *, mode: int = DEFAULT_MODE, backlog: int = 64) -> ClaimedSocket:
    """Bind and listen on ``path`` with ``mode``, replacing only a dead worker's socket.

    Raises :class:`SocketBusy` when a live process answers on ``path``, and
    ``ConfigurationError`` when ``path`` is something other than a socket (a
    file is never deleted) or cannot be bound.
    """
    _clear_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, mode)
        sock.listen(backlog)
        inode = os.lstat(path).st_ino
    except OSError as exc:
        sock.close()
        raise ConfigurationError(
            f"TASKQ_HEALTH_SOCKET_PATH={path!r}: cannot serve the health socket there "
            f"({exc.strerror or exc}); set a writable path or TASKQ_HEALTH_ENABLED=false"
        ) from None
    sock.setblocking(False)
    return ClaimedSocket(sock, path, inode)


def _clear_stale(path: str) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigurationError(f"TASKQ_HEALTH_SOCKET_PATH={path!r}: {exc.strerror}") from None
    if not stat.S_ISSOCK(info.st_mode):
        raise ConfigurationError(
            f"TASKQ_HEALTH_SOCKET_PATH={path!r} exists and is not a socket; "
            "remove it or choose another path"
        )
    if _answers(path):
        raise SocketBusy(
            f"TASKQ_HEALTH_SOCKET_PATH={path!r} is in use by another live worker; "
            "give each worker a distinct TASKQ_HEALTH_SOCKET_PATH, or set "
            "TASKQ_HEALTH_ENABLED=false"
        )
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # nothing listens: a killed worker's leftover


def _answers(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(PROBE_TIMEOUT)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except TimeoutError:
        return True  # a full backlog: someone is there
    except OSError as exc:
        raise ConfigurationError(
            f"TASKQ_HEALTH_SOCKET_PATH={path!r}: cannot check the existing socket "
            f"({exc.strerror or exc})"
        ) from None
    finally:
        probe.close()
    return True
