"""Contract-suite factory for the psycopg adapter.

It runs on the session schema of ``postgres_common`` (migrated once per
process, emptied before each test), which builds the harness both Postgres
drivers share; this module names the psycopg classes.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Final

from taskq.adapters.psycopg.driver import Pool
from taskq.adapters.psycopg.pool import PoolOptions, create_pool
from taskq.adapters.psycopg.store import PsycopgQueueStore
from taskq.testing.harness import Harness

from .postgres_common import PortClasses, PostgresDriver, driver_harness

if TYPE_CHECKING:
    from taskq.testing.harness import HarnessFactory


def _ports() -> PortClasses:
    from taskq.adapters.psycopg.leader_lock import PsycopgLeaderLock
    from taskq.adapters.psycopg.notifier import PsycopgNotifier
    from taskq.adapters.psycopg.rate_limiter import PsycopgRateLimiter

    return PortClasses(PsycopgLeaderLock, PsycopgNotifier, PsycopgRateLimiter)


async def _create_pool(dsn: str, max_size: int) -> Pool:
    return await create_pool(dsn, PoolOptions(max_size=max_size))


_PSYCOPG: Final = PostgresDriver("psycopg", PsycopgQueueStore, _create_pool, _ports)


def psycopg_harness() -> AbstractAsyncContextManager[Harness]:
    """The psycopg adapter on the session schema, emptied for this test."""
    return driver_harness(_PSYCOPG)


if TYPE_CHECKING:
    _factory: HarnessFactory = psycopg_harness

__all__ = ["psycopg_harness"]
