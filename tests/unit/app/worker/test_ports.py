"""build_worker_ports: caller-owned versus built ports, drivers, user factories."""

from __future__ import annotations

import pytest
from tests.integration.worker.support import server_dsn_or_skip
from tests.unit.app.worker.harness import make_settings

from taskq.adapters.asyncpg.leader_lock import AsyncpgLeaderLock
from taskq.adapters.asyncpg.notifier import AsyncpgNotifier
from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.adapters.psycopg.leader_lock import PsycopgLeaderLock
from taskq.adapters.psycopg.notifier import PsycopgNotifier
from taskq.app.composition import build_worker_ports
from taskq.domain.errors import ConfigurationError, StoreUnavailable


async def test_passed_ports_are_used_as_they_are_and_not_owned(
    backend: MemoryBackend, clock: FakeClock
) -> None:
    """Everything passed: nothing is built, nothing will be closed by TaskQ."""
    store, lock, notifier = backend.store(), backend.leader_lock(), backend.notifier()
    ports = await build_worker_ports(
        make_settings(), store=store, leader_lock=lock, notifier=notifier, clock=clock
    )
    assert (ports.store, ports.leader_lock, ports.notifier, ports.clock) == (
        store,
        lock,
        notifier,
        clock,
    )
    assert ports.owned == frozenset()
    await ports.close_owned()
    await store.ping()


async def test_notify_off_needs_no_notifier(backend: MemoryBackend, clock: FakeClock) -> None:
    """With TASKQ_NOTIFY_ENABLED=false a store and a lock are enough."""
    ports = await build_worker_ports(
        make_settings(notify_enabled=False),
        store=backend.store(),
        leader_lock=backend.leader_lock(),
        clock=clock,
    )
    assert ports.notifier is None


async def test_asyncpg_fills_in_the_lock_and_notifier(backend: MemoryBackend) -> None:
    """TASKQ_DRIVER=asyncpg builds the leader lock and notifier on the direct DSN, owned
    (the DSN is connected to once at start: see test_custom_ports.py)."""
    store = backend.store()
    ports = await build_worker_ports(
        make_settings(driver="asyncpg", pg_dsn=server_dsn_or_skip()), store=store
    )
    assert isinstance(ports.leader_lock, AsyncpgLeaderLock)
    assert isinstance(ports.notifier, AsyncpgNotifier)
    assert ports.owned == frozenset({"leader_lock", "notifier"})
    await ports.close_owned()  # never connected: closing is a no-op
    await store.ping()


async def test_psycopg_fills_in_its_own_lock_and_notifier(backend: MemoryBackend) -> None:
    """TASKQ_DRIVER=psycopg builds the psycopg twins."""
    settings = make_settings(driver="psycopg", pg_dsn=server_dsn_or_skip())
    ports = await build_worker_ports(settings, store=backend.store())
    assert isinstance(ports.leader_lock, PsycopgLeaderLock)
    assert isinstance(ports.notifier, PsycopgNotifier)
    await ports.close_owned()


async def test_a_built_store_that_cannot_connect_fails_the_build() -> None:
    """Without a store the driver's store opens its pool at once: unreachable → StoreUnavailable."""
    settings = make_settings(driver="asyncpg", pg_dsn="postgresql://u:p@127.0.0.1:1/db")
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:1"):
        await build_worker_ports(settings)


async def test_factory_ports_are_owned_and_replaced_ones_closed(
    backend: MemoryBackend,
) -> None:
    """A module:factory driver builds the missing ports; a port the caller passed wins."""
    mine = backend.store()
    ports = await build_worker_ports(
        make_settings(driver="taskq.app.composition:memory_worker_ports"), store=mine
    )
    assert ports.store is mine
    assert ports.owned == frozenset({"leader_lock", "notifier", "rate_limiter"})
    await ports.close_owned()
    await mine.ping()


async def test_async_factory_is_awaited() -> None:
    """A factory may be a coroutine function."""
    ports = await build_worker_ports(
        make_settings(driver="tests.unit.app.worker.harness:async_memory_ports")
    )
    assert isinstance(ports.store, MemoryQueueStore)
    assert "store" in ports.owned
    await ports.close_owned()
    with pytest.raises(StoreUnavailable):
        await ports.store.ping()


@pytest.mark.parametrize(
    ("driver", "message"),
    [
        ("tests.unit.app.worker.harness:not_ports", "not taskq.app.worker.ports.WorkerPorts"),
        ("tests.unit.app.worker.harness:missing", "cannot load the factory"),
        ("no_such_module_xyz:factory", "cannot load the factory"),
    ],
)
async def test_bad_factories_are_configuration_errors(driver: str, message: str) -> None:
    """A factory that cannot be loaded or returns the wrong type fails with its spec named."""
    with pytest.raises(ConfigurationError, match=message):
        await build_worker_ports(make_settings(driver=driver))
