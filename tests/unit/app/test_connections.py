"""Connection hook points: ownership slots, cache kwargs, lock budgets, init hooks."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import taskq.app.connections as connections
from taskq.app.connections import (
    DEFAULT_MAX_CACHED_STATEMENT_LIFETIME,
    DEFAULT_STATEMENT_CACHE_SIZE,
    WorkerConnections,
    bounded_lock_budget_ms,
    connection_init_hook,
    lock_budget_command_timeout_secs,
    lock_budget_pairs,
    statement_cache_kwargs,
    with_connection_init,
)
from taskq.app.settings import TaskQSettings

ROLES = ["dispatcher_pool", "heartbeat_pool", "worker_pool", "notify_conn", "leader_conn"]
ROLES.append("redis_client")
ENQUEUE_BUDGETS = (
    "max_pending_lock_timeout_ms",
    "unique_lock_timeout_ms",
    "idempotency_lock_timeout_ms",
)


async def _factory() -> object:
    return object()


# ---------------------------------------------------------------- module surface


def test_public_names_are_exactly_the_reference() -> None:
    """__all__ lists exactly the names the connections reference documents."""
    assert sorted(connections.__all__) == sorted(
        [
            "DEFAULT_MAX_CACHED_STATEMENT_LIFETIME",
            "DEFAULT_STATEMENT_CACHE_SIZE",
            "ConnFactory",
            "PoolFactory",
            "RedisFactory",
            "WorkerConnections",
            "bounded_lock_budget_ms",
            "connection_init_hook",
            "lock_budget_command_timeout_secs",
            "lock_budget_pairs",
            "statement_cache_kwargs",
            "with_connection_init",
        ]
    )
    assert (DEFAULT_STATEMENT_CACHE_SIZE, DEFAULT_MAX_CACHED_STATEMENT_LIFETIME) == (512, 3600)


def test_importing_settings_and_connections_loads_no_driver() -> None:
    """The app-layer modules import no database or Redis driver at run time."""
    code = (
        "import sys, taskq.app.connections, taskq.app.settings\n"
        "print(sorted(m for m in ('asyncpg', 'psycopg', 'psycopg_pool', 'redis') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- WorkerConnections


@pytest.mark.parametrize("role", ROLES)
def test_concrete_and_factory_for_one_role_is_refused(role: str) -> None:
    """Both slots of one role raise ValueError with the reference's exact message."""
    kwargs: dict[str, Any] = {role: object(), f"{role}_factory": _factory}
    with pytest.raises(ValueError, match="not both") as info:
        WorkerConnections(**kwargs)
    assert str(info.value) == (
        f"WorkerConnections: provide either '{role}' or '{role}_factory', "
        "not both (role would be ambiguous)."
    )


def test_different_roles_may_mix_concrete_and_factory() -> None:
    """A concrete pool for one role and a factory for another is fine."""
    conns = WorkerConnections(worker_pool=object(), dispatcher_pool_factory=_factory)
    assert conns.worker_pool is not None
    assert conns.dispatcher_pool_factory is _factory


def test_empty_overrides_have_none() -> None:
    """With every slot None, has_any() is False (DSN construction everywhere)."""
    assert WorkerConnections().has_any() is False


@pytest.mark.parametrize("slot", [name for role in ROLES for name in (role, f"{role}_factory")])
def test_any_single_slot_counts(slot: str) -> None:
    """Each of the twelve slots alone makes has_any() True."""
    value: Any = _factory if slot.endswith("_factory") else object()
    assert WorkerConnections(**{slot: value}).has_any() is True


def test_twelve_slots() -> None:
    """The dataclass has exactly the reference's twelve slots, all defaulting to None."""
    slots = [f.name for f in dataclasses.fields(WorkerConnections)]
    assert slots == [name for role in ROLES for name in (role, f"{role}_factory")]
    assert all(getattr(WorkerConnections(), name) is None for name in slots)


def test_overrides_cannot_be_reassigned() -> None:
    """Frozen: a later assignment cannot sneak past the both-slots check."""
    conns = WorkerConnections(worker_pool=object())
    with pytest.raises(dataclasses.FrozenInstanceError):
        conns.worker_pool_factory = _factory  # type: ignore[misc]


# ---------------------------------------------------------------- statement cache


def test_cache_kwargs_without_settings_are_the_constants() -> None:
    """No settings → the module defaults."""
    assert statement_cache_kwargs() == {
        "statement_cache_size": 512,
        "max_cached_statement_lifetime": 3600,
    }


def test_cache_kwargs_follow_operator_tuning() -> None:
    """A direct-connection deployment gets the configured cache values."""
    settings = TaskQSettings.load_from_dict(
        {"statement_cache_size": 100, "max_cached_statement_lifetime": 60}
    )
    assert statement_cache_kwargs(settings) == {
        "statement_cache_size": 100,
        "max_cached_statement_lifetime": 60,
    }


def test_cache_kwargs_are_zero_behind_a_pooler() -> None:
    """TASKQ_PG_IS_POOLED wins over any cache tuning: both values are 0."""
    settings = TaskQSettings.load_from_dict({"pg_is_pooled": True, "statement_cache_size": 100})
    assert statement_cache_kwargs(settings) == {
        "statement_cache_size": 0,
        "max_cached_statement_lifetime": 0,
    }


def test_cache_kwargs_are_a_fresh_dict() -> None:
    """Mutating one result does not change the next."""
    first = statement_cache_kwargs()
    first["statement_cache_size"] = 1
    assert statement_cache_kwargs()["statement_cache_size"] == 512


# ---------------------------------------------------------------- lock budgets


@pytest.mark.parametrize(
    ("budget", "timeout", "expected"),
    [
        (200.0, 5.0, 200.0),  # well inside half the bound
        (2500.0, 5.0, 2500.0),  # exactly half: allowed
        (4000.0, 5.0, 2500.0),  # above half: clamped
        (9000.0, 5.0, 2500.0),  # above the whole bound: clamped
        (4000.0, None, 4000.0),  # no client-side bound
        (4000.0, 0.0, 4000.0),  # a zero timeout means no bound
        (4000.0, -1.0, 4000.0),
        (0.0, 5.0, 0.0),  # unbounded wait stands
        (-1.0, 5.0, -1.0),
    ],
)
def test_bounded_lock_budget(budget: float, timeout: float | None, expected: float) -> None:
    """A budget is clamped to half the per-query timeout unless either side is unbounded."""
    assert bounded_lock_budget_ms(budget, timeout) == expected


@given(
    budget=st.floats(min_value=0.001, max_value=1e7),
    timeout=st.floats(min_value=0.001, max_value=1e4),
)
def test_bounded_budget_leaves_room_for_the_server(budget: float, timeout: float) -> None:
    """A clamped budget never exceeds the budget nor half the client-side timeout."""
    result = bounded_lock_budget_ms(budget, timeout)
    assert result <= budget
    assert result <= timeout * 1000.0 * 0.5


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([], 5.0),
        ([(200.0, 200.0), (200.0, 200.0)], 5.0),  # defaults keep the floor
        ([(100.0, 200.0)], 5.0),  # lowered budgets never move it
        ([(0.0, 200.0), (-5.0, 200.0)], 5.0),  # unbounded budgets never move it
        ([(2000.0, 200.0)], 5.0),  # raised but still inside the floor's share
        ([(4000.0, 200.0)], 8.0),  # raised past it: configured / share
        ([(4000.0, 200.0), (6000.0, 200.0), (300.0, 200.0)], 12.0),  # the largest wins
    ],
)
def test_command_timeout_grows_for_raised_budgets(
    pairs: list[tuple[float, float]], expected: float
) -> None:
    """The pool bound is the floor, or configured/share for a budget raised above default."""
    assert lock_budget_command_timeout_secs(pairs, floor_secs=5.0) == expected


@given(
    budgets=st.lists(
        st.tuples(st.floats(min_value=-1e3, max_value=1e6), st.floats(min_value=1, max_value=1e4)),
        max_size=4,
    ),
    floor=st.floats(min_value=0.1, max_value=60),
)
def test_derived_bound_delivers_every_raised_budget(
    budgets: list[tuple[float, float]], floor: float
) -> None:
    """Under the derived bound, no budget raised above its default is clamped."""
    bound = lock_budget_command_timeout_secs(budgets, floor_secs=floor)
    assert bound >= floor
    for configured, default in budgets:
        if configured > default and configured > 0:
            assert bounded_lock_budget_ms(configured, bound) == pytest.approx(configured)


def test_lock_budget_pairs_read_defaults_from_field_metadata() -> None:
    """Configured values come from the instance, defaults from the model's fields."""
    settings = TaskQSettings.load_from_dict(
        {"max_pending_lock_timeout_ms": 750, "idempotency_lock_timeout_ms": "0"}
    )
    assert lock_budget_pairs(settings, ENQUEUE_BUDGETS) == [
        (750.0, 200.0),
        (200.0, 200.0),
        (0.0, 200.0),
    ]


class _TunedSettings(TaskQSettings):
    """A model whose shipped default differs, to prove defaults are not restated."""

    unique_lock_timeout_ms: float = 900.0


def test_lock_budget_pairs_follow_a_subclass_default() -> None:
    """A subclass's own field default is the one reported."""
    settings = _TunedSettings.load_from_dict({})
    assert lock_budget_pairs(settings, ["unique_lock_timeout_ms"]) == [(900.0, 900.0)]


@pytest.mark.parametrize("name", ["no_such_budget", "schema_name", "pg_is_pooled"])
def test_lock_budget_pairs_refuse_non_budget_names(name: str) -> None:
    """A name without a numeric default is a caller bug, reported by name."""
    with pytest.raises(ValueError, match=name):
        lock_budget_pairs(TaskQSettings.load_from_dict({}), [name])


# ---------------------------------------------------------------- init hooks


class _Conn:
    """A stand-in connection recording whether and how it was closed."""

    def __init__(self, *, close_error: BaseException | None = None, hang: bool = False) -> None:
        self.closed = False
        self.close_cancelled = False
        self._close_error = close_error
        self._hang = hang

    async def close(self) -> None:
        if self._hang:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.close_cancelled = True
                raise
        if self._close_error is not None:
            raise self._close_error
        self.closed = True


class _HookFailed(Exception):
    """The init hook's own error, which must be the one that propagates."""


def _factory_for(conn: object) -> Any:
    async def factory() -> object:
        return conn

    return factory


async def test_init_runs_once_on_the_produced_connection() -> None:
    """The wrapped factory returns the factory's connection after init ran on it once."""
    conn = _Conn()
    seen: list[object] = []

    async def init(c: Any) -> None:
        seen.append(c)

    wrapped = with_connection_init(_factory_for(conn), init)
    assert await wrapped() is conn
    assert seen == [conn]
    assert conn.closed is False


async def test_failed_init_closes_connection_and_reraises() -> None:
    """If init raises, the connection is closed and the hook's error propagates."""
    conn = _Conn()
    error = _HookFailed("codec registration failed")

    async def init(c: Any) -> None:
        raise error

    with pytest.raises(_HookFailed) as info:
        await with_connection_init(_factory_for(conn), init)()
    assert info.value is error
    assert conn.closed is True


async def test_close_failure_never_masks_the_hook_error(caplog: pytest.LogCaptureFixture) -> None:
    """A close that raises is logged; the hook's error is still what the caller sees."""
    conn = _Conn(close_error=OSError("connection reset"))

    async def init(c: Any) -> None:
        raise _HookFailed

    with pytest.raises(_HookFailed):
        await with_connection_init(_factory_for(conn), init)()
    assert "connection-init-close-failed" in caplog.text


async def test_hanging_close_is_bounded() -> None:
    """A close that never returns is abandoned at close_timeout and the hook's error raised."""
    conn = _Conn(hang=True)

    async def init(c: Any) -> None:
        raise _HookFailed

    wrapped = with_connection_init(_factory_for(conn), init, close_timeout=0.01)
    with pytest.raises(_HookFailed):
        await wrapped()
    assert conn.close_cancelled is True


async def test_cancelled_init_still_closes_connection() -> None:
    """Cancellation during init closes the connection and stays a cancellation."""
    conn = _Conn()

    async def init(c: Any) -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await with_connection_init(_factory_for(conn), init)()
    assert conn.closed is True


async def test_sync_close_and_no_close_are_handled() -> None:
    """A connection with a plain close() is closed; one without close() is left alone."""

    class SyncConn:
        closed = False

        def close(self) -> None:
            self.closed = True

    async def init(c: Any) -> None:
        raise _HookFailed

    sync_conn = SyncConn()
    with pytest.raises(_HookFailed):
        await with_connection_init(_factory_for(sync_conn), init)()
    assert sync_conn.closed is True
    with pytest.raises(_HookFailed):
        await with_connection_init(_factory_for(object()), init)()


async def test_factory_failure_skips_init() -> None:
    """If the factory itself fails, init never runs and the factory's error propagates."""
    calls: list[object] = []

    async def broken() -> object:
        raise ConnectionRefusedError

    async def init(c: Any) -> None:
        calls.append(c)

    with pytest.raises(ConnectionRefusedError):
        await with_connection_init(broken, init)()
    assert calls == []


def test_init_hook_round_trips() -> None:
    """connection_init_hook returns the very callable with_connection_init declared."""

    async def init(c: Any) -> None:
        return None

    assert connection_init_hook(with_connection_init(_factory, init)) is init


def test_bare_factories_declare_no_hook() -> None:
    """A plain callable (or any object) declares nothing: None."""
    assert connection_init_hook(_factory) is None
    assert connection_init_hook(object()) is None


def test_non_callable_declaration_is_ignored() -> None:
    """A factory whose hook attribute is not callable declares nothing."""

    async def factory() -> object:
        return object()

    factory.__taskq_connection_init__ = "not a hook"  # type: ignore[attr-defined]
    assert connection_init_hook(factory) is None
