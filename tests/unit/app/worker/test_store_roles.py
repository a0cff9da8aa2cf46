"""Each worker task sees only its own part of the store: the roles are pinned here.

A task's role lists exactly the store methods it calls (``store_roles``), and
its view of the worker state (``task_views``) gives it that role, never the
whole store. mypy --strict (``scripts/check``) then refuses a call outside
it; widening a role means changing the sets below, a visible change.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Protocol, get_type_hints

import pytest

from taskq.app.worker import store_roles, task_views
from taskq.ports.queue_store import WorkerStore

ROLES: dict[str, set[str]] = {
    "startup": {"register_worker", "sync_actor_configs", "deregister_worker"},
    "leader": {
        "promote_scheduled",
        "reclaim_expired",
        "time_to_lease_expiry",
        "fail_past_deadline",
        "cleanup_stale_workers",
        "prune",
        "expire_archive",
        "expire_results",
        "enqueue",
        "enqueue_many",
        "queue_depths",
        "stranded_actors",
    },
    "heartbeat": {
        "heartbeat",
        "register_worker",
        "release",
        "escalate_cancel",
        "finish",
        "isolate_worker",
    },
    "hand_back": {"isolate_worker"},
    "completer": {"finish_many"},
    "start_marks": {"mark_started"},
    "producer": {"claim", "finish_and_claim", "finish_many", "release"},
    "consumer": {"release", "reschedule", "interrupt"},
    "shutdown": {"drain_unstarted", "release", "interrupt", "mark_started", "isolate_worker"},
    "until_idle": {"count_active", "stranded_actors"},
    "health": {"ping"},
}

#: Which view each task is typed against, and the role its ``store`` has there.
VIEW_STORES: dict[type, type] = {
    task_views.StartupView: store_roles.StartupStore,
    task_views.LeaderView: store_roles.LeaderStore,
    task_views.HeartbeatView: store_roles.HeartbeatStore,
    task_views.HandBackView: store_roles.HandBackStore,
    task_views.ProducerView: store_roles.ProducerStore,
    task_views.ConsumerView: store_roles.ConsumerStore,
    task_views.StartMarksView: store_roles.StartMarkStore,
    task_views.ShutdownView: store_roles.ShutdownStore,
    task_views.UntilIdleView: store_roles.UntilIdleStore,
    task_views.HealthView: store_roles.HealthStore,
}


def members(protocol: type) -> set[str]:
    """The public methods and properties a protocol declares (its own and inherited)."""
    names: set[str] = set()
    for klass in protocol.__mro__:
        if klass in (object, Protocol) or not getattr(klass, "_is_protocol", False):
            continue
        names.update(name for name in vars(klass) if not name.startswith("_"))
    return names


@pytest.mark.parametrize("task", sorted(ROLES))
def test_each_task_role_lists_exactly_the_store_methods_it_calls(task: str) -> None:
    assert members(store_roles.TASK_ROLES[task]) == ROLES[task]


def test_every_task_has_a_pinned_role() -> None:
    assert set(store_roles.TASK_ROLES) == set(ROLES)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_each_role_is_part_of_the_worker_store(role: str) -> None:
    store_methods = members(WorkerStore)
    assert ROLES[role] <= store_methods
    for name in ROLES[role]:
        restated = getattr(store_roles.TASK_ROLES[role], name)
        declared = getattr(WorkerStore, name)
        # Restated with the port's own signature, not a looser one of its own.
        assert inspect.signature(restated) == inspect.signature(declared), name


@pytest.mark.parametrize("view", list(VIEW_STORES), ids=lambda view: view.__name__)
def test_each_task_view_gives_the_task_its_role_not_the_whole_store(view: type) -> None:
    store = view.store  # type: ignore[attr-defined]
    assert get_type_hints(store.fget, vars(task_views))["return"] is VIEW_STORES[view]
    assert "ports" not in members(view)  # the ports would hand it the whole store


def test_no_task_view_lets_a_task_replace_a_part_another_owns() -> None:
    """Each part is read-only but in its owner's view (a property, never an attribute)."""
    owned: dict[str, set[type]] = {
        "leadership": {task_views.LeaderView},
        "watch": {task_views.HeartbeatView},
        "ledger": {task_views.ConsumerView},
        "stopping": {task_views.ShutdownView},
        "active": {task_views.ConsumerView},
    }
    for part, owners in owned.items():
        for view in VIEW_STORES:
            hints = (
                get_type_hints(getattr(view, part).fget, vars(task_views))
                if hasattr(view, part)
                else None
            )
            if hints is None:
                continue
            name = hints["return"].__name__
            if view in owners:
                assert not name.endswith("View"), (view.__name__, part)
            else:
                assert name.endswith("View"), (view.__name__, part, name)


def test_mypy_refuses_a_task_a_store_call_or_a_write_outside_its_view(tmp_path: Path) -> None:
    """What the roles are for: the type checker, not review, keeps a task to its part."""
    api = pytest.importorskip("mypy.api")
    source = tmp_path / "outside_its_role.py"
    source.write_text(
        "from taskq.app.worker.task_views import HeartbeatView, LeaderView\n"
        "async def leader(state: LeaderView) -> None:\n"
        "    await state.store.drain_unstarted('w')\n"
        "async def heartbeat(state: HeartbeatView) -> None:\n"
        "    state.leadership.is_leader = True\n"
        "    state.ledger.writes_in_flight += 1\n"
    )
    out, _, status = api.run(["--strict", "--no-error-summary", str(source)])
    assert status == 1
    assert '"LeaderStore" has no attribute "drain_unstarted"' in out
    assert out.count("is read-only") == 2, out
