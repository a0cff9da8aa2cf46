"""The leader session's keepalives: the server drops a silent peer within about the lease."""

from __future__ import annotations

import re

import pytest

from taskq.adapters.postgres.keepalive import PROBES, keepalive_setup


def _values(statements: list[str]) -> dict[str, int]:
    pairs = (re.fullmatch(r"SET (\w+) = (\d+)", s) for s in statements)
    return {m.group(1): int(m.group(2)) for m in pairs if m is not None}


@pytest.mark.parametrize("lease", [4.0, 5.0, 10.0, 60.0, 3600.0])
def test_idle_plus_every_probe_fits_in_the_lease(lease: float) -> None:
    got = _values(keepalive_setup(lease, 160000))
    assert got["tcp_keepalives_count"] == PROBES
    assert got["tcp_keepalives_idle"] >= 1
    assert got["tcp_keepalives_interval"] >= 1
    assert got["tcp_keepalives_idle"] + PROBES * got["tcp_keepalives_interval"] <= lease
    assert got["tcp_user_timeout"] == int(lease * 1000)


def test_a_tiny_lease_still_gets_whole_seconds() -> None:
    got = _values(keepalive_setup(0.5, 160000))
    assert got["tcp_keepalives_count"] == PROBES
    assert got["tcp_keepalives_idle"] == got["tcp_keepalives_interval"] == 1
    assert got["tcp_user_timeout"] == 1000


def test_servers_before_12_get_no_tcp_user_timeout() -> None:
    assert "tcp_user_timeout" not in _values(keepalive_setup(60.0, 110000))
