"""WorkerConnections wired into build_worker_ports: who owns what, and where Redis fits.

Caller-given pools and connections must survive ``close_owned()``; what a
factory made is TaskQ's and must be closed by it. Runs on real Postgres (a
fresh migrated schema per test) and, for the rate limiter, real Redis.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from contracts.provision import NoTestDatabase, ProvisionedSchema, migrated_schema
from tests.integration.adapters.pg_store_support import ASYNCPG, DRIVERS, PSYCOPG, StoreDriver

from taskq.adapters.asyncpg.store import AsyncpgQueueStore
from taskq.adapters.redis import FallbackRateLimiter
from taskq.app.composition import WORKER_CONNECTIONS_POOL_ROLES, build_worker_ports
from taskq.app.connections import WorkerConnections
from taskq.app.settings import WorkerSettings
from taskq.domain.errors import ConfigurationError

REDIS_URL = "redis://127.0.0.1:6379/15"
# Port 1 refuses at once, so the limiter fails fast instead of timing out.
UNREACHABLE_REDIS_URL = "redis://127.0.0.1:1/15"


@pytest.fixture(params=DRIVERS, ids=lambda d: d.name)
def driver(request: pytest.FixtureRequest) -> StoreDriver:
    spec: StoreDriver = request.param
    return spec


@pytest.fixture
async def provisioned() -> AsyncIterator[ProvisionedSchema]:
    try:
        async with migrated_schema(prefix="taskq_conn") as schema:
            yield schema
    except NoTestDatabase as exc:
        pytest.skip(str(exc))


def _settings(
    provisioned: ProvisionedSchema, driver: str, *, redis_url: str | None = None
) -> WorkerSettings:
    return WorkerSettings(
        pg_dsn=provisioned.dsn,
        schema_name=provisioned.schema,
        driver=driver,
        redis_url=redis_url,
        notify_enabled=True,
    )


def _conn_closed(conn: Any) -> bool:
    return bool(conn.is_closed()) if hasattr(conn, "is_closed") else bool(conn.closed)


async def _open_conn(driver: StoreDriver, dsn: str) -> Any:
    if driver is ASYNCPG:
        import asyncpg

        return await asyncpg.connect(dsn)
    import psycopg

    return await psycopg.AsyncConnection.connect(dsn, autocommit=True)


async def test_caller_pool_is_used_and_left_open(
    driver: StoreDriver, provisioned: ProvisionedSchema
) -> None:
    """A caller-owned pool runs the store and is still open after close_owned()."""
    pool = await driver.caller_pool(provisioned.dsn)
    try:
        assert not callable(pool)  # how PooledQueueStore tells a pool from a factory
        ports = await build_worker_ports(
            _settings(provisioned, driver.name), connections=WorkerConnections(worker_pool=pool)
        )
        assert await ports.store.pool() is pool  # type: ignore[attr-defined]
        await ports.close_owned()
        assert not driver.pool_closed(pool)
        assert await driver.pool_fetchval(pool, "SELECT 1") == 1
    finally:
        await pool.close()


async def test_pool_factory_pool_is_closed_at_exit(
    driver: StoreDriver, provisioned: ProvisionedSchema
) -> None:
    """A factory-made pool runs the store and is closed by close_owned()."""
    made: list[Any] = []

    async def factory() -> Any:
        made.append(await driver.caller_pool(provisioned.dsn))
        return made[-1]

    ports = await build_worker_ports(
        _settings(provisioned, driver.name),
        connections=WorkerConnections(heartbeat_pool_factory=factory),
    )
    try:
        assert len(made) == 1
        assert await ports.store.pool() is made[0]  # type: ignore[attr-defined]
    finally:
        await ports.close_owned()
    assert driver.pool_closed(made[0])


async def test_caller_dedicated_connections_are_left_open(
    driver: StoreDriver, provisioned: ProvisionedSchema
) -> None:
    """Caller-owned notify and leader connections are used, then left open."""
    notify_conn = await _open_conn(driver, provisioned.dsn)
    leader_conn = await _open_conn(driver, provisioned.dsn)
    try:
        ports = await build_worker_ports(
            _settings(provisioned, driver.name),
            connections=WorkerConnections(notify_conn=notify_conn, leader_conn=leader_conn),
        )
        assert await ports.leader_lock.try_acquire()
        assert ports.notifier is not None
        await ports.notifier.start()
        await ports.close_owned()
        assert not _conn_closed(notify_conn)
        assert not _conn_closed(leader_conn)
        assert await driver.fetchval(leader_conn, "SELECT 1") == 1
    finally:
        for conn in (notify_conn, leader_conn):
            await conn.close()


async def test_factory_dedicated_connections_are_closed_at_exit(
    driver: StoreDriver, provisioned: ProvisionedSchema
) -> None:
    """Factory-made notify and leader connections are closed by close_owned()."""
    made: list[Any] = []

    async def factory() -> Any:
        made.append(await _open_conn(driver, provisioned.dsn))
        return made[-1]

    ports = await build_worker_ports(
        _settings(provisioned, driver.name),
        connections=WorkerConnections(notify_conn_factory=factory, leader_conn_factory=factory),
    )
    try:
        assert len(made) == 2
        assert await ports.leader_lock.try_acquire()
        assert ports.notifier is not None
        await ports.notifier.start()
    finally:
        await ports.close_owned()
    assert all(_conn_closed(conn) for conn in made)


async def test_redis_url_puts_the_rate_limiter_on_redis(provisioned: ProvisionedSchema) -> None:
    """With a Redis URL the limiter is a FallbackRateLimiter that Redis answers."""
    ports = await build_worker_ports(_settings(provisioned, "asyncpg", redis_url=REDIS_URL))
    try:
        limiter = ports.rate_limiter
        assert isinstance(limiter, FallbackRateLimiter)
        key = f"conn-test-{provisioned.schema}"
        first = await limiter.acquire_rate(key, limit=1, window=timedelta(seconds=30))
        second = await limiter.acquire_rate(key, limit=1, window=timedelta(seconds=30))
        assert first.allowed
        assert not second.allowed
        assert limiter.fallbacks == 0
    finally:
        await ports.close_owned()


async def test_unreachable_redis_falls_back_to_postgres(
    driver: StoreDriver, provisioned: ProvisionedSchema
) -> None:
    """With Redis down and the fallback on, acquire_rate is answered by Postgres."""
    settings = _settings(provisioned, driver.name, redis_url=UNREACHABLE_REDIS_URL)
    assert settings.rate_limit_pg_fallback_enabled
    ports = await build_worker_ports(settings)
    try:
        limiter = ports.rate_limiter
        assert isinstance(limiter, FallbackRateLimiter)
        decision = await limiter.acquire_rate("down", limit=1, window=timedelta(seconds=30))
        assert decision.allowed
        assert limiter.fallbacks == 1
    finally:
        await ports.close_owned()


async def test_pool_of_the_other_driver_is_refused_naming_the_role(
    provisioned: ProvisionedSchema,
) -> None:
    """An asyncpg pool under TASKQ_DRIVER=psycopg is a ConfigurationError naming the role."""
    pool = await ASYNCPG.caller_pool(provisioned.dsn)
    try:
        with pytest.raises(ConfigurationError, match="dispatcher_pool"):
            await build_worker_ports(
                _settings(provisioned, PSYCOPG.name),
                connections=WorkerConnections(dispatcher_pool=pool),
            )
        assert not ASYNCPG.pool_closed(pool)
    finally:
        await pool.close()


async def test_several_pool_roles_use_the_first_and_warn(
    provisioned: ProvisionedSchema, caplog: pytest.LogCaptureFixture
) -> None:
    """With several pool roles set the dispatcher's runs the store and a warning is logged."""
    first = await ASYNCPG.caller_pool(provisioned.dsn)
    second = await ASYNCPG.caller_pool(provisioned.dsn)
    try:
        with caplog.at_level(logging.WARNING):
            ports = await build_worker_ports(
                _settings(provisioned, ASYNCPG.name),
                connections=WorkerConnections(dispatcher_pool=first, worker_pool=second),
            )
        assert await ports.store.pool() is first  # type: ignore[attr-defined]
        await ports.close_owned()
        assert any(r.getMessage() == WORKER_CONNECTIONS_POOL_ROLES for r in caplog.records)
    finally:
        await first.close()
        await second.close()


async def test_store_calls_a_pool_factory_once_lazily_and_owns_it(
    provisioned: ProvisionedSchema,
) -> None:
    """A callable source is called on first use only, once, and its pool closed by close()."""
    made: list[Any] = []

    async def factory() -> Any:
        made.append(await ASYNCPG.caller_pool(provisioned.dsn))
        return made[-1]

    store = AsyncpgQueueStore(factory)
    assert made == []
    assert await store.pool() is await store.pool()
    assert len(made) == 1
    await store.close()
    assert ASYNCPG.pool_closed(made[0])


@pytest.mark.parametrize(("setting", "expected"), [(7.5, 7.5), (0.0, None)])
async def test_pool_max_inactive_lifetime_reaches_the_built_pool(
    driver: StoreDriver, provisioned: ProvisionedSchema, setting: float, expected: float | None
) -> None:
    """TASKQ_POOL_MAX_INACTIVE_LIFETIME was validated and documented but never passed on:
    the pools kept their own defaults (asyncpg 300 s, psycopg 600 s). 0 means never."""
    settings = _settings(provisioned, driver.name).with_overrides(
        pool_max_inactive_lifetime=setting
    )
    ports = await build_worker_ports(settings)
    try:
        pool = await ports.store.pool()  # type: ignore[attr-defined]
        if driver is ASYNCPG:
            assert pool._max_inactive_connection_lifetime == (expected or 0.0)
        else:
            assert pool.max_idle == expected if expected else pool.max_idle >= 86400 * 365
    finally:
        await ports.close_owned()
