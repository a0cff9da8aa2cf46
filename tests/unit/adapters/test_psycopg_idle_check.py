"""The psycopg store's check for input on an idle connection works on any descriptor."""

from __future__ import annotations

import os
import resource
import socket
from collections.abc import Iterator

import pytest

from taskq.adapters.psycopg.checkout import _readable

#: Above select()'s FD_SETSIZE (1024), where select() cannot look.
HIGH_FD = 2000


@pytest.fixture
def high_fd_pair() -> Iterator[tuple[int, socket.socket]]:
    """A socket whose reading end is duplicated onto descriptor HIGH_FD, and its peer."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= HIGH_FD:
        pytest.skip(f"this process may not open descriptor {HIGH_FD} (hard limit {hard})")
    if soft <= HIGH_FD:
        resource.setrlimit(resource.RLIMIT_NOFILE, (HIGH_FD + 1, hard))
    reader, writer = socket.socketpair()
    high = os.dup2(reader.fileno(), HIGH_FD)
    try:
        yield high, writer
    finally:
        os.close(high)
        reader.close()
        writer.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_input_is_seen_on_a_descriptor_above_fd_setsize(
    high_fd_pair: tuple[int, socket.socket],
) -> None:
    fd, writer = high_fd_pair
    assert not _readable(fd)
    writer.send(b"E")
    assert _readable(fd)
