"""A closed client, or the app's pool closed under it, fails ``wait()`` at once.

Before, "store is closed" was a ``StoreUnavailable`` that ``wait()`` retried as an
outage: with no timeout it polled forever, with one it used it all up.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from tests.integration.client.client_actors import Pair, add
from tests.integration.client.pools import caller_pool
from tests.integration.worker.support import Database

from taskq import JobsClient, StoreClosed

pytestmark = pytest.mark.integration


async def test_wait_fails_at_once_when_its_client_closes(db: Database) -> None:
    async with JobsClient.connect(db.dsn, driver=db.driver, schema=db.schema) as client:
        handle = await client.enqueue(add, Pair(a=1, b=2))
        waiter = asyncio.create_task(handle.wait())  # no timeout, no worker
        await asyncio.sleep(0.05)
    with pytest.raises(StoreClosed, match="closed"):
        await asyncio.wait_for(waiter, 5)
    started = time.monotonic()
    with pytest.raises(StoreClosed):
        await handle.wait(timeout=3)
    assert time.monotonic() - started < 1


async def test_wait_fails_at_once_when_the_apps_pool_is_closed(db: Database) -> None:
    async with caller_pool(db.driver, db.dsn) as pool:
        client = pool.client(db.schema)
        handle = await client.enqueue(add, Pair(a=1, b=2))
        await pool.pool.close()
        with pytest.raises(StoreClosed, match="pool TaskQ runs on is closed"):
            await asyncio.wait_for(handle.wait(), 5)
        await client.aclose()
