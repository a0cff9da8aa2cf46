"""The leader and LISTEN sessions: where a lost one is rebuilt from, and what they refuse.

Real Postgres, both drivers. A factory's session is rebuilt by calling the
factory again (the DSN may hold no credentials: here it points nowhere), a
caller's session is rebuilt from the DSN with a warning, dedicated sessions
never keep prepared statements (a transaction-mode pooler would break them),
and a worker told its DSN is pooled refuses to run them through it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from contracts.provision import NoTestDatabase, ProvisionedSchema, migrated_schema
from tests.integration.adapters.pg_store_support import ASYNCPG, DRIVERS, StoreDriver

from taskq.app.composition import build_worker_ports
from taskq.app.connections import WorkerConnections
from taskq.app.settings import WorkerSettings
from taskq.domain.errors import ConfigurationError

# Port 1 refuses at once: anything rebuilt from this DSN fails.
UNREACHABLE_DSN = "postgresql://postgres@127.0.0.1:1/test"


@pytest.fixture(params=DRIVERS, ids=lambda d: d.name)
def driver(request: pytest.FixtureRequest) -> StoreDriver:
    spec: StoreDriver = request.param
    return spec


@pytest.fixture
async def provisioned() -> AsyncIterator[ProvisionedSchema]:
    try:
        async with migrated_schema(prefix="taskq_ded") as schema:
            yield schema
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


async def _open_conn(driver: StoreDriver, dsn: str) -> Any:
    if driver is ASYNCPG:
        import asyncpg

        return await asyncpg.connect(dsn)
    import psycopg

    return await psycopg.AsyncConnection.connect(dsn, autocommit=True)


async def _terminate(driver: StoreDriver, dsn: str, pid: int) -> None:
    conn = await _open_conn(driver, dsn)
    try:
        await driver.fetchval(conn, f"SELECT pg_terminate_backend({pid})")
    finally:
        await conn.close()


async def _until(predicate: Any) -> None:
    """Poll ``predicate`` (which itself drives the reconnect) for up to 10 s."""
    async with asyncio.timeout(10.0):
        while not await predicate():  # noqa: ASYNC110 - the predicate does the work
            await asyncio.sleep(0.05)


async def test_lost_factory_sessions_are_rebuilt_by_the_factory(
    driver: StoreDriver, provisioned: ProvisionedSchema
) -> None:
    """pg_terminate_backend on both sessions: the factory is called again, never the DSN."""
    calls: dict[str, int] = {"leader": 0, "notify": 0}

    def factory(role: str) -> Any:
        async def make() -> Any:
            calls[role] += 1
            return await _open_conn(driver, provisioned.dsn)

        return make

    pool = await driver.caller_pool(provisioned.dsn)
    settings = WorkerSettings(
        pg_dsn=UNREACHABLE_DSN, schema_name=provisioned.schema, driver=driver.name
    )
    connections = WorkerConnections(
        worker_pool=pool,
        leader_conn_factory=factory("leader"),
        notify_conn_factory=factory("notify"),
    )
    ports = await build_worker_ports(settings, connections=connections)
    notifier = ports.notifier
    assert notifier is not None
    try:
        lock = ports.leader_lock
        assert await lock.try_acquire()
        await notifier.start()
        leader_pid, notify_pid = lock.backend_pid, notifier.backend_pid  # type: ignore[attr-defined]
        await _terminate(driver, provisioned.dsn, leader_pid)
        await _terminate(driver, provisioned.dsn, notify_pid)

        async def leader_back() -> bool:
            try:
                return await lock.try_acquire()
            except Exception:
                return False

        await _until(leader_back)

        async def listening_again() -> bool:
            # The worker drives reconnects through health checks.
            return await notifier.health_check() and notifier.backend_pid != notify_pid  # type: ignore[attr-defined]

        await _until(listening_again)
        assert calls["leader"] >= 2
        assert calls["notify"] >= 2
    finally:
        await ports.close_owned()
        await pool.close()


async def test_lost_caller_leader_conn_rebuilt_from_dsn_says_so(
    driver: StoreDriver, provisioned: ProvisionedSchema, caplog: pytest.LogCaptureFixture
) -> None:
    """A caller's connection cannot be rebuilt: the DSN replaces it, with a warning."""
    leader_conn = await _open_conn(driver, provisioned.dsn)
    settings = WorkerSettings(
        pg_dsn=provisioned.dsn,
        schema_name=provisioned.schema,
        driver=driver.name,
        notify_enabled=False,
    )
    ports = await build_worker_ports(
        settings, connections=WorkerConnections(leader_conn=leader_conn)
    )
    try:
        assert await ports.leader_lock.try_acquire()
        await _terminate(driver, provisioned.dsn, ports.leader_lock.backend_pid)  # type: ignore[attr-defined]
        with caplog.at_level(logging.WARNING):
            assert await ports.leader_lock.try_acquire()
        events = [r for r in caplog.records if r.getMessage() == "dedicated-conn-from-dsn"]
        assert events
        assert getattr(events[0], "role", None) == "leader_conn"
    finally:
        await ports.close_owned()
        await leader_conn.close()


async def test_dedicated_sessions_keep_no_prepared_statements(
    driver: StoreDriver, provisioned: ProvisionedSchema
) -> None:
    """Behind a transaction-mode pooler a named prepared statement breaks the session."""
    settings = WorkerSettings(
        pg_dsn=provisioned.dsn,
        schema_name=provisioned.schema,
        driver=driver.name,
        notify_enabled=False,
    )
    ports = await build_worker_ports(settings)
    try:
        lock = ports.leader_lock
        for _ in range(8):  # psycopg prepares from the 5th run of a statement
            assert await lock.try_acquire()
            assert await lock.probe()
        conn = lock._conn  # type: ignore[attr-defined]
        prepared = await driver.fetchval(conn, "SELECT count(*) FROM pg_prepared_statements")
        assert prepared == 0
    finally:
        await ports.close_owned()


@pytest.mark.parametrize("direct", [None, "same"])
async def test_pooled_dsn_without_direct_dsn_is_refused(
    provisioned: ProvisionedSchema, direct: str | None
) -> None:
    """TASKQ_PG_IS_POOLED with no separate direct DSN: no leader lock or LISTEN through it."""
    settings = WorkerSettings(
        pg_dsn=provisioned.dsn,
        pg_dsn_direct=provisioned.dsn if direct == "same" else "",
        schema_name=provisioned.schema,
        pg_is_pooled=True,
    )
    with pytest.raises(ConfigurationError, match="TASKQ_PG_DSN_DIRECT") as info:
        await build_worker_ports(settings)
    assert "leader lock" in str(info.value)
    assert "LISTEN" in str(info.value)


async def test_pooled_dsn_with_direct_dsn_starts(provisioned: ProvisionedSchema) -> None:
    settings = WorkerSettings(
        pg_dsn=provisioned.dsn.replace("127.0.0.1", "localhost"),
        pg_dsn_direct=provisioned.dsn,
        schema_name=provisioned.schema,
        pg_is_pooled=True,
    )
    ports = await build_worker_ports(settings)
    await ports.close_owned()


@pytest.mark.parametrize(
    "role", ["leader_conn_factory", "notify_conn_factory", "worker_pool_factory"]
)
async def test_factory_returning_none_is_refused_naming_it(
    provisioned: ProvisionedSchema, role: str
) -> None:
    """Not a silent fall back to the DSN, nor an AttributeError later."""

    async def nothing() -> None:
        return None

    settings = WorkerSettings(pg_dsn=provisioned.dsn, schema_name=provisioned.schema)
    with pytest.raises(ConfigurationError, match=f"WorkerConnections.{role} returned None"):
        await build_worker_ports(settings, connections=WorkerConnections(**{role: nothing}))


@pytest.mark.parametrize(
    ("field", "value"),
    [("redis_client", "redis://x"), ("redis_client_factory", None)],
)
async def test_a_wrong_redis_object_is_refused_naming_the_field(
    provisioned: ProvisionedSchema, field: str, value: object
) -> None:
    """Was an AttributeError ('no attribute register_script') from deep in the limiter."""

    async def factory() -> object:
        return value

    given: Any = factory if field.endswith("_factory") else value
    settings = WorkerSettings(pg_dsn=provisioned.dsn, schema_name=provisioned.schema)
    with pytest.raises(ConfigurationError, match=f"WorkerConnections.{field} "):
        await build_worker_ports(settings, connections=WorkerConnections(**{field: given}))
