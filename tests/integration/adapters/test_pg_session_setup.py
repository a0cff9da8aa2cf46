"""Every session TaskQ opens directly runs as TaskQ's statements expect, whatever the role says.

A role or database may default to another isolation level or end idle
sessions (``idle_session_timeout``). TaskQ's statements are written for READ
COMMITTED (a claim re-checks a row another claim changed instead of failing),
and its listener, leader and pooled connections sit idle by design, so each
session it opens sets both back (``postgres.dedicated.session_setup``).
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from tests.integration.adapters.pg_store_support import StoreDriver
from tests.integration.worker.roles import DOCUMENTED_GRANTS, as_user, login_role

from taskq.adapters.asyncpg.leader_lock import AsyncpgLeaderLock
from taskq.adapters.asyncpg.notifier import AsyncpgNotifier
from taskq.adapters.postgres.schema import Schema
from taskq.adapters.psycopg.leader_lock import PsycopgLeaderLock
from taskq.adapters.psycopg.notifier import PsycopgNotifier

pytestmark = pytest.mark.integration

SESSION = {"transaction_isolation": "read committed", "idle_session_timeout": "0"}
SHOW = (
    "SELECT current_setting('transaction_isolation') || '/' "
    "|| current_setting('idle_session_timeout')"
)
EXPECTED = f"{SESSION['transaction_isolation']}/{SESSION['idle_session_timeout']}"


async def _show(driver: StoreDriver, conn: Any) -> str:
    return str(await driver.fetchval(conn, SHOW))


async def test_pools_and_dedicated_sessions_set_what_taskq_needs(
    driver: StoreDriver, dsn: str, schema: Schema
) -> None:
    admin = await asyncpg.connect(dsn)
    try:
        if await admin.fetchval("SELECT current_setting('server_version_num')::int") < 140000:
            pytest.skip("idle_session_timeout needs Postgres 14")
        async with login_role(admin, schema.name, DOCUMENTED_GRANTS) as role:
            await admin.execute(
                f"ALTER ROLE {role} SET default_transaction_isolation = 'serializable';"
                f" ALTER ROLE {role} SET idle_session_timeout = '1h'"
            )
            role_dsn = as_user(dsn, role)
            plain = await driver.caller_pool(role_dsn)
            try:  # a connection TaskQ did not open keeps the role's defaults
                assert await driver.pool_fetchval(plain, SHOW) == "serializable/1h"
            finally:
                await plain.close()

            store = driver.store(role_dsn, schema=schema, max_size=2)
            try:
                assert await driver.pool_fetchval(await store.pool(), SHOW) == EXPECTED
            finally:
                await store.close()

            lock_type = AsyncpgLeaderLock if driver.name == "asyncpg" else PsycopgLeaderLock
            lock = lock_type(role_dsn, schema=schema)
            try:
                assert await lock.try_acquire()
                assert await _show(driver, lock._conn) == EXPECTED
            finally:
                await lock.close()

            notifier_type = AsyncpgNotifier if driver.name == "asyncpg" else PsycopgNotifier
            notifier = notifier_type(role_dsn, schema=schema)
            try:
                await notifier.start()
                assert await _show(driver, notifier._conn) == EXPECTED
            finally:
                await notifier.close()
    finally:
        await admin.close()
