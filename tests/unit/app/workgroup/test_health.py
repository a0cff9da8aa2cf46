"""Staleness on the supervisor's clock: how long last_seen_at has not changed."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from taskq.app.workgroup.child import health_socket_for
from taskq.app.workgroup.health import StaleTracker
from taskq.app.workgroup.instance import new_instance_id

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_moving_heartbeat_is_never_stale_whatever_the_database_clock() -> None:
    tracker = StaleTracker()
    tracker.started(7, now=0.0)
    # The database clock is a day behind this host's: irrelevant, only changes count.
    for second in range(1, 200, 10):
        seen = T0 - timedelta(days=1) + timedelta(seconds=second)
        assert not tracker.is_stale(7, seen, now=float(second), stale_after=30.0)


def test_a_heartbeat_that_stops_moving_goes_stale_after_stale_after() -> None:
    tracker = StaleTracker()
    tracker.started(7, now=0.0)
    assert not tracker.is_stale(7, T0, now=5.0, stale_after=30.0)
    assert not tracker.is_stale(7, T0, now=35.0, stale_after=30.0)
    assert tracker.is_stale(7, T0, now=35.1, stale_after=30.0)


def test_a_child_that_never_registers_goes_stale_from_its_start() -> None:
    tracker = StaleTracker()
    tracker.started(8, now=100.0)
    assert not tracker.is_stale(8, None, now=120.0, stale_after=30.0)
    assert tracker.is_stale(8, None, now=131.0, stale_after=30.0)


def test_instance_ids_are_uuid7_and_sort_by_time() -> None:
    first = new_instance_id()
    value = uuid.UUID(first)
    assert (value.version, value.variant) == (7, uuid.RFC_4122)
    assert new_instance_id() != first


def test_each_child_has_its_own_health_socket() -> None:
    assert health_socket_for("/tmp/taskq_health.sock", "api") == "/tmp/taskq_health.api.sock"
    assert health_socket_for("/run/h", "media") == "/run/h.media"
