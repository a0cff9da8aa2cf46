"""One child: a ``taskq worker`` process built from its ``[[workers]]`` entry.

The child runs ``python -m taskq.app.cli worker`` with the supervisor's own interpreter,
so it is the same TaskQ and the same installed application, whatever ``PATH`` says. It
is put in a process group of its own: a Ctrl-C at a terminal then reaches the
supervisor only, which passes it on once; were the children in the terminal's group
too, each would get the signal twice, and a worker takes a repeated signal as a
request to hurry.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import PurePosixPath

from taskq.app.workgroup.config import WorkerSpec


def worker_argv(spec: WorkerSpec) -> list[str]:
    """The ``taskq worker`` command line for ``spec``: the options the worker CLI has."""
    argv = [sys.executable, "-m", "taskq.app.cli", "worker", "--actors", spec.actors]
    if spec.queues is not None:
        argv += ["--queues", ",".join(spec.queues)]
    if spec.max_concurrency is not None:
        argv += ["--max-concurrency", str(spec.max_concurrency)]
    return argv


def health_socket_for(base: str, name: str) -> str:
    """The child's own health socket: ``/tmp/taskq_health.sock`` -> ``/tmp/taskq_health.api.sock``.

    Every worker binds ``TASKQ_HEALTH_SOCKET_PATH`` and refuses to start when a live
    worker holds it, so children sharing the one path would all but the first crash.
    """
    path = PurePosixPath(base)
    return str(path.with_name(f"{path.stem}.{name}{path.suffix}"))


def worker_env(
    spec: WorkerSpec, base: Mapping[str, str], instance: str, health_socket: str
) -> dict[str, str]:
    """The child's environment: the supervisor's, plus what ``taskq worker`` has no flag for.

    ``TASKQ_WORKGROUP_INSTANCE`` and ``TASKQ_WORKER_LABEL`` (the entry's name) end up in
    the child's ``workers`` row; ``TASKQ_POLL_INTERVAL`` carries ``poll_interval``;
    ``TASKQ_HEALTH_SOCKET_PATH`` is the child's own (``health_socket_for``).
    """
    env = {
        **base,
        "TASKQ_WORKGROUP_INSTANCE": instance,
        "TASKQ_WORKER_LABEL": spec.name,
        "TASKQ_HEALTH_SOCKET_PATH": health_socket_for(health_socket, spec.name),
    }
    if spec.poll_interval is not None:
        env["TASKQ_POLL_INTERVAL"] = repr(spec.poll_interval)
    return env


class Child:
    """A running (or exited) child process of one ``[[workers]]`` entry."""

    def __init__(self, spec: WorkerSpec, env: Mapping[str, str]) -> None:
        self.spec = spec
        self._popen = subprocess.Popen(
            worker_argv(spec), env=dict(env), stdin=subprocess.DEVNULL, process_group=0
        )

    @property
    def pid(self) -> int:
        return self._popen.pid

    def poll(self) -> int | None:
        """The exit code once it ended (``-N``: killed by signal N), else ``None``."""
        return self._popen.poll()

    def send(self, sig: signal.Signals) -> None:
        """Signal the child if it still runs (a reaped PID may belong to someone else)."""
        if self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended since the poll
                os.kill(self._popen.pid, sig)
