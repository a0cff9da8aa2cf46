"""The store ``taskq jobs|queues|workers|actor-config`` work on."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import cast

from taskq.adapters.postgres.schema import Schema
from taskq.app.composition.drivers import DRIVER_KITS, new_store, open_pool
from taskq.app.composition.factory import factory_worker_ports
from taskq.app.port_check import check_port
from taskq.app.settings import BUILTIN_DRIVERS, WorkerSettings, require_pg_dsn
from taskq.ports.queue_store import QueueStore


@contextlib.asynccontextmanager
async def operator_store(settings: WorkerSettings) -> AsyncIterator[QueueStore]:
    """The store ``taskq jobs|queues|workers|actor-config`` work on, closed on exit.

    Built as the worker's would be: on ``TASKQ_DRIVER`` asyncpg/psycopg a small
    pool on the direct DSN and the worker's schema (each call bounded by
    ``TASKQ_CLIENT_CALL_TIMEOUT``); on a ``module:factory`` driver the factory's
    store (its other ports are closed unused), checked for every store method.
    Raises ``ConfigurationError`` or ``StoreUnavailable`` as the worker would.
    """
    if settings.driver in BUILTIN_DRIVERS:
        pg_store = new_store(
            DRIVER_KITS[settings.driver](),
            settings,
            require_pg_dsn(settings.pg_dsn_direct),
            Schema(settings.schema_name),
            max_size=2,
            call_timeout=settings.client_call_timeout,
        )
        await open_pool(pg_store)
        try:
            yield pg_store
        finally:
            await pg_store.close()
        return
    ports = await factory_worker_ports(settings)
    try:
        for unused in (ports.notifier, ports.leader_lock, ports.rate_limiter):
            if unused is not None:
                await unused.close()
        check_port("store", ports.store, QueueStore)  # the operator's JobAdmin too
        yield cast("QueueStore", ports.store)
    finally:
        await ports.store.close()
