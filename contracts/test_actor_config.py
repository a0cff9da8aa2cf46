"""ActorConfigAdmin and QueueAdmin: config sync, drift, capacity overrides, queue modes."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from taskq.domain.actor_config import (
    ActorConfig,
    ActorConfigSyncReport,
    CapacityOverride,
    QueueMode,
)
from taskq.domain.errors import ActorConfigDriftError, ActorConfigDriftList
from taskq.domain.storable import MAX_RESULT_TTL
from taskq.ports.store_params import CapacityUpdate
from taskq.testing.harness import Harness

A = ActorConfig(
    actor="a",
    queue="q1",
    metadata={"team": "x"},
    max_concurrent=4,
    max_pending=100,
    result_ttl=timedelta(hours=1),
)
B = ActorConfig(actor="b", queue="q2")


def _drifts(error: ActorConfigDriftList) -> list[tuple[str, str, object, object]]:
    assert all(isinstance(d, ActorConfigDriftError) for d in error.drifts)
    return sorted(
        ((d.actor, d.field, d.stored, d.registered) for d in error.drifts),
        key=lambda t: (t[0], t[1]),
    )


async def test_sync_creates_rows_seeded_from_the_literals(harness: Harness) -> None:
    """The first sync creates one row per actor holding exactly the registered values."""
    store = harness.store
    report = await store.sync_actor_configs([A, B])
    assert isinstance(report, ActorConfigSyncReport)
    assert sorted(report.created) == ["a", "b"]
    assert (report.capacity_overrides, report.overwritten) == ((), ())
    assert await store.get_actor_config("a") == A
    assert await store.get_actor_config("b") == B
    assert sorted(await store.list_actor_configs(), key=lambda c: c.actor) == [A, B]


async def test_unknown_actor_has_no_config(harness: Harness) -> None:
    """get_actor_config of an actor never synced returns None."""
    await harness.store.sync_actor_configs([A])
    assert await harness.store.get_actor_config("nope") is None


async def test_identical_sync_reports_nothing(harness: Harness) -> None:
    """Re-syncing the stored configuration creates, overrides and overwrites nothing."""
    store = harness.store
    await store.sync_actor_configs([A, B])
    assert await store.sync_actor_configs([A, B]) == ActorConfigSyncReport()


async def test_capacity_literals_never_overwrite_stored_values(harness: Harness) -> None:
    """A differing capacity literal is reported as an override and the stored value stays."""
    store = harness.store
    await store.sync_actor_configs([A])
    changed = replace(A, max_concurrent=10, max_pending=5, result_ttl=timedelta(minutes=5))
    report = await store.sync_actor_configs([changed])
    assert report.created == ()
    assert report.overwritten == ()
    assert sorted(
        ((o.actor, o.field, o.stored, o.registered) for o in report.capacity_overrides),
        key=lambda t: t[1],
    ) == [
        ("a", "max_concurrent", 4, 10),
        ("a", "max_pending", 100, 5),
        ("a", "result_ttl", timedelta(hours=1), timedelta(minutes=5)),
    ]
    assert all(isinstance(o, CapacityOverride) for o in report.capacity_overrides)
    assert await store.get_actor_config("a") == A


async def test_structural_drift_raises_one_error_per_actor_and_field(harness: Harness) -> None:
    """Structural drift raises ActorConfigDriftList (one per actor × field) and writes nothing."""
    store = harness.store
    await store.sync_actor_configs([A, B])
    drifted_a = replace(A, queue="elsewhere", metadata={"team": "y"})
    drifted_b = replace(B, metadata={"new": True})
    with pytest.raises(ActorConfigDriftList) as drift:
        await store.sync_actor_configs([drifted_a, drifted_b])
    assert _drifts(drift.value) == [
        ("a", "metadata", {"team": "x"}, {"team": "y"}),
        ("a", "queue", "q1", "elsewhere"),
        ("b", "metadata", {}, {"new": True}),
    ]
    assert await store.get_actor_config("a") == A
    assert await store.get_actor_config("b") == B


async def test_forced_sync_overwrites_structure_but_not_capacity(harness: Harness) -> None:
    """With force, drifted structural fields are overwritten and reported; capacity still stays."""
    store = harness.store
    await store.sync_actor_configs([A])
    forced = replace(A, queue="elsewhere", metadata={"team": "y"}, max_concurrent=1)
    report = await store.sync_actor_configs([forced], force=True)
    assert sorted(report.overwritten) == [("a", "metadata"), ("a", "queue")]
    assert [(o.field, o.stored, o.registered) for o in report.capacity_overrides] == [
        ("max_concurrent", 4, 1)
    ]
    assert await store.get_actor_config("a") == replace(
        A, queue="elsewhere", metadata={"team": "y"}
    )


async def test_concurrent_syncs_create_each_row_once(harness: Harness) -> None:
    """Concurrent syncs of the same actors on several stores succeed and create each row once."""
    stores = [harness.store, *[await harness.open_store() for _ in range(3)]]
    configs = [A, B, ActorConfig(actor="c", queue="q3", max_concurrent=2)]
    reports = await asyncio.gather(
        *(stores[i % len(stores)].sync_actor_configs(configs) for i in range(8))
    )
    created = sorted(actor for r in reports for actor in r.created)
    assert created == ["a", "b", "c"]
    assert all(r.capacity_overrides == () and r.overwritten == () for r in reports)
    assert len(await harness.store.list_actor_configs()) == 3


async def test_set_actor_capacity_changes_only_the_named_fields(harness: Harness) -> None:
    """set_actor_capacity writes the given fields, NULLs the cleared ones and leaves the rest."""
    store = harness.store
    await store.sync_actor_configs([A])
    updated = await store.set_actor_capacity(CapacityUpdate(actor="a", max_concurrent=20))
    assert updated == replace(A, max_concurrent=20)
    cleared = await store.set_actor_capacity(
        CapacityUpdate(actor="a", clear=frozenset({"max_pending", "result_ttl"}))
    )
    assert cleared == replace(A, max_concurrent=20, max_pending=None, result_ttl=None)
    assert await store.get_actor_config("a") == cleared


async def test_a_result_ttl_past_the_limit_is_refused_and_nothing_changes(
    harness: Harness,
) -> None:
    """A result_ttl past MAX_RESULT_TTL (365,250 days, what @actor allows) is a ValueError
    naming the field, in set_actor_capacity and in a sync: each finished job's expiry would
    otherwise be a time no reader can load (year 12978 broke every later read)."""
    store = harness.store
    await store.sync_actor_configs([A])
    with pytest.raises(ValueError, match=r"result_ttl is at most 365,250 days"):
        await store.set_actor_capacity(
            CapacityUpdate(actor="a", result_ttl=MAX_RESULT_TTL + timedelta(days=1))
        )
    with pytest.raises(ValueError, match=r"result_ttl is at most 365,250 days"):
        await store.sync_actor_configs(
            [ActorConfig(actor="z", queue="q", result_ttl=timedelta(days=4_000_000))]
        )
    assert await store.get_actor_config("a") == A
    assert await store.get_actor_config("z") is None
    at_limit = await store.set_actor_capacity(CapacityUpdate(actor="a", result_ttl=MAX_RESULT_TTL))
    assert at_limit.result_ttl == MAX_RESULT_TTL


async def test_a_capacity_count_past_int32_is_refused_and_nothing_changes(
    harness: Harness,
) -> None:
    """max_concurrent or max_pending past 2,147,483,647 (a store's integer column) is a
    ValueError naming the field, not the driver's text; the row is left alone."""
    store = harness.store
    await store.sync_actor_configs([A])
    over = 2**31
    with pytest.raises(ValueError, match=r"max_concurrent is at most 2,147,483,647"):
        await store.set_actor_capacity(CapacityUpdate(actor="a", max_concurrent=over))
    with pytest.raises(ValueError, match=r"max_pending is at most 2,147,483,647"):
        await store.set_actor_capacity(CapacityUpdate(actor="a", max_pending=over))
    with pytest.raises(ValueError, match=r"max_concurrent is at most 2,147,483,647"):
        await store.sync_actor_configs([ActorConfig(actor="z", queue="q", max_concurrent=over)])
    with pytest.raises(ValueError, match=r"max_pending is at most 2,147,483,647"):
        await store.sync_actor_configs([ActorConfig(actor="z", queue="q", max_pending=over)])
    assert await store.get_actor_config("a") == A
    assert await store.get_actor_config("z") is None
    top = await store.set_actor_capacity(
        CapacityUpdate(actor="a", max_concurrent=2**31 - 1, max_pending=2**31 - 1)
    )
    assert (top.max_concurrent, top.max_pending) == (2**31 - 1, 2**31 - 1)


async def test_operator_capacity_survives_a_restart_sync(harness: Harness) -> None:
    """A startup sync with the old literals keeps the values set by set_actor_capacity."""
    store = harness.store
    await store.sync_actor_configs([A])
    await store.set_actor_capacity(
        CapacityUpdate(actor="a", max_concurrent=7, clear=frozenset({"max_pending"}))
    )
    report = await store.sync_actor_configs([A])
    assert sorted((o.field, o.stored, o.registered) for o in report.capacity_overrides) == [
        ("max_concurrent", 7, 4),
        ("max_pending", None, 100),
    ]
    assert await store.get_actor_config("a") == replace(A, max_concurrent=7, max_pending=None)


# --- queue modes -------------------------------------------------------------------------


async def test_queues_default_to_strict_fifo(harness: Harness) -> None:
    """A fresh store has no queue-mode rows, so every queue is strict FIFO."""
    modes = await harness.store.queue_modes()
    assert modes == {}
    assert modes.get("default", QueueMode.STRICT_FIFO) is QueueMode.STRICT_FIFO


async def test_set_queue_mode_is_read_back(harness: Harness) -> None:
    """set_queue_mode stores a mode per queue, and setting it again replaces it."""
    store = harness.store
    await store.set_queue_mode("multi", QueueMode.ROUND_ROBIN)
    assert await store.queue_modes() == {"multi": QueueMode.ROUND_ROBIN}
    await store.set_queue_mode("multi", QueueMode.STRICT_FIFO)
    await store.set_queue_mode("other", QueueMode.ROUND_ROBIN)
    modes = await store.queue_modes()
    assert modes.get("multi", QueueMode.STRICT_FIFO) is QueueMode.STRICT_FIFO
    assert modes["other"] is QueueMode.ROUND_ROBIN
