"""Test-wide settings: Hypothesis profiles; each test's own health socket path."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", deadline=None, max_examples=100)
settings.register_profile(
    "ci",
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(autouse=True)
def _own_health_socket(monkeypatch: pytest.MonkeyPatch, _socket_dir: str) -> None:
    """Every test's workers get a health socket of their own, never the default path.

    A worker on the real clock serves ``TASKQ_HEALTH_SOCKET_PATH`` (default
    ``/tmp/taskq_health.sock``): a test must neither take that path from a worker
    running on the machine nor be refused because one holds it. Tests that set the
    variable themselves (or clear the environment) still do.
    """
    if "TASKQ_HEALTH_SOCKET_PATH" not in os.environ:
        path = os.path.join(_socket_dir, f"h{next(_SOCKETS)}.sock")
        monkeypatch.setenv("TASKQ_HEALTH_SOCKET_PATH", path)


#: Numbers the tests' health sockets within the session's directory.
_SOCKETS = itertools.count()


@pytest.fixture(scope="session")
def _socket_dir() -> Iterator[str]:
    # Short, under /tmp: a Unix socket's path is limited to about 107 bytes.
    directory = tempfile.mkdtemp(prefix="tq", dir="/tmp")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)
