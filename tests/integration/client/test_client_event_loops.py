"""A client is bound to the event loop it was first used on.

Before, a psycopg-backed client called from a second loop waited forever, and
asyncpg leaked a raw RuntimeError ("attached to a different loop"). A session-wide
client with one loop per test hits this.
"""

from __future__ import annotations

import asyncio

import pytest
from tests.integration.client.client_actors import Pair, add
from tests.integration.worker.support import Database

from taskq import ConfigurationError, JobsClient

pytestmark = pytest.mark.integration


async def test_a_call_from_another_event_loop_is_refused_and_the_client_goes_on(
    db: Database,
) -> None:
    async with JobsClient.connect(db.dsn, driver=db.driver, schema=db.schema) as client:
        first = await client.enqueue(add, Pair(a=1, b=2))  # the pool opens on this loop

        async def elsewhere() -> object:
            return await asyncio.wait_for(client.enqueue(add, Pair(a=3, b=4)), 5)

        for _ in range(2):
            with pytest.raises(ConfigurationError, match="bound to the event loop"):
                await asyncio.wait_for(asyncio.to_thread(asyncio.run, elsewhere()), 10)
        again = await client.enqueue(add, Pair(a=5, b=6))
        assert again.job_id > first.job_id
        assert await client.get(first.job_id) is not None
