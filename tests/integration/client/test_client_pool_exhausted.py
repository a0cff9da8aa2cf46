"""A client on the app's own pool, every connection of which the app holds.

asyncpg waited forever; psycopg said "lost the Postgres connection" after its
pool's 30 s. Both now wait a bounded time and say the pool is exhausted.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack

import pytest
from tests.integration.client.client_actors import Pair, add
from tests.integration.client.pools import caller_pool
from tests.integration.worker.support import Database

from taskq import StoreUnavailable
from taskq.adapters.postgres import driver as pg_driver

pytestmark = pytest.mark.integration


async def test_enqueue_on_an_exhausted_pool_fails_in_time_naming_it(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_driver, "POOL_ACQUIRE_TIMEOUT", 0.5, raising=False)
    async with caller_pool(db.driver, db.dsn) as app, AsyncExitStack() as held:
        for _ in range(3):  # the pool's max_size: the app holds every connection
            await held.enter_async_context(app.transaction())
        client = app.client(db.schema)
        started = time.monotonic()
        with pytest.raises(
            StoreUnavailable, match=r"no connection free in the pool of 3 within 0.5 s"
        ):
            async with asyncio.timeout(10):
                await client.enqueue(add, Pair(a=1, b=2))
        assert time.monotonic() - started < 5
        await client.aclose()
