"""A client on the app's own pool, every connection of which the app holds: the call
ends within its bound (``call_timeout``) saying the pool is exhausted."""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack

import pytest
from tests.integration.client.client_actors import Pair, add
from tests.integration.client.pools import caller_pool
from tests.integration.worker.support import Database

from taskq import PoolWaitTimeout

pytestmark = pytest.mark.integration


async def test_enqueue_on_an_exhausted_pool_fails_in_time_naming_it(db: Database) -> None:
    """An enqueue that cannot get a connection raises PoolWaitTimeout naming the pool's
    size and the bound, within the bound."""
    async with caller_pool(db.driver, db.dsn) as app, AsyncExitStack() as held:
        for _ in range(3):  # the pool's max_size: the app holds every connection
            await held.enter_async_context(app.transaction())
        client = app.client(db.schema, call_timeout=0.5)
        started = time.monotonic()
        with pytest.raises(
            PoolWaitTimeout, match=r"no connection free in the pool of 3 within 0.5 s"
        ):
            async with asyncio.timeout(10):
                await client.enqueue(add, Pair(a=1, b=2))
        assert time.monotonic() - started < 2  # the bound, and the cancel grace at most
        await client.aclose()
