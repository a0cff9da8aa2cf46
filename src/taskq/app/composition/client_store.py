"""The stores a ``JobsClient`` runs on: its own pool, or a caller's.

Both refuse a schema behind this TaskQ (``SchemaNotMigrated``): an own pool
when it opens, a caller's before its first call.
"""

from __future__ import annotations

from typing import cast

from taskq.adapters.postgres.schema import Schema
from taskq.app.composition.client_schema import SchemaCheckedStore, check_client_schema
from taskq.app.composition.drivers import DRIVER_KITS, new_store, open_pool
from taskq.app.settings import DEFAULT_CLIENT_CALL_TIMEOUT, TaskQSettings, require_pg_dsn
from taskq.domain.errors import ConfigurationError
from taskq.ports.queue_store import QueueStore


async def open_store(settings: TaskQSettings) -> QueueStore:
    """A client store on its own new pool (``TASKQ_DRIVER``, DSN, schema from ``settings``).

    The pool is opened now, so an unreachable database fails here with
    ``StoreUnavailable``, and the schema checked (one query), so one behind
    this TaskQ fails with ``SchemaNotMigrated``; ``store.close()`` closes the pool.
    """
    schema = Schema(settings.schema_name)
    load_kit = DRIVER_KITS.get(settings.driver)
    if load_kit is None:
        raise ConfigurationError(
            f"TASKQ_DRIVER={settings.driver!r} names a custom adapter factory, which builds "
            "worker ports; build the client from its store with JobsClient(store)"
        )
    store = new_store(
        load_kit(),
        settings,
        require_pg_dsn(settings.pg_dsn),
        schema,
        max_size=settings.client_pool_size,
        call_timeout=settings.client_call_timeout,
    )
    await open_pool(store)
    try:
        await check_client_schema(store)
    except BaseException:
        await store.close()
        raise
    return store


def store_from_pool(
    pool: object, *, driver: str, schema: str, call_timeout: float = DEFAULT_CLIENT_CALL_TIMEOUT
) -> QueueStore:
    """A client store on a caller-owned pool (asyncpg.Pool or psycopg AsyncConnectionPool).

    TaskQ never closes the pool: ``store.close()`` leaves it open. Each call
    ends within ``call_timeout`` seconds; the pool's own settings are not touched.
    The first call checks the schema (see ``SchemaCheckedStore``).
    """
    validated = Schema(schema)
    load_kit = DRIVER_KITS.get(driver)
    if load_kit is None:
        raise ConfigurationError(f"unknown driver {driver!r}: expected 'asyncpg' or 'psycopg'")
    kit = load_kit()
    if not isinstance(pool, kit.pool_type):
        raise ConfigurationError(f"expected {kit.pool_label}, got {type(pool).__name__}")
    store = kit.store(pool, schema=validated, call_timeout=call_timeout)
    # Delegates every other attribute to the store, so it serves as one.
    return cast("QueueStore", SchemaCheckedStore(store))
