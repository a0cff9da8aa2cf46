"""One LOOP-scope driver connection shared by concurrent jobs: warned at start.

Jobs running at once on one asyncpg/psycopg connection fail with "another
operation is in progress"; nothing said so before the first failure.
"""

from __future__ import annotations

import logging

import asyncpg
import psycopg
import pytest
from tests.unit.app.worker.harness import events_named, fields

from taskq import Dependencies, Scope
from taskq.app.worker import events
from taskq.app.worker.startup import shared_connection_warning


async def _never() -> object:
    raise AssertionError("not called at validation")


@pytest.mark.parametrize("conn_type", [asyncpg.Connection, psycopg.AsyncConnection])
def test_a_loop_scope_connection_with_concurrency_is_warned(
    conn_type: type, caplog: pytest.LogCaptureFixture
) -> None:
    deps = Dependencies()
    deps.register(conn_type, _never, scope=Scope.LOOP)
    with caplog.at_level(logging.WARNING):
        shared_connection_warning(deps, max_concurrency=4)
    [record] = events_named(caplog, events.LOOP_SCOPE_CONNECTION_SHARED)
    assert "pool" in fields(record)["note"]
    assert fields(record)["max_concurrency"] == 4


@pytest.mark.parametrize(
    ("conn_type", "scope", "concurrency"),
    [
        (asyncpg.Connection, Scope.LOOP, 1),  # one job at a time: fine
        (asyncpg.Pool, Scope.LOOP, 8),  # a pool is what to use
        (asyncpg.Connection, Scope.PROCESS, 8),  # refused elsewhere, not this warning
    ],
)
def test_no_warning_when_nothing_is_shared(
    conn_type: type, scope: Scope, concurrency: int, caplog: pytest.LogCaptureFixture
) -> None:
    deps = Dependencies()
    deps.register(conn_type, _never, scope=scope)
    with caplog.at_level(logging.WARNING):
        shared_connection_warning(deps, max_concurrency=concurrency)
    assert not events_named(caplog, events.LOOP_SCOPE_CONNECTION_SHARED)
