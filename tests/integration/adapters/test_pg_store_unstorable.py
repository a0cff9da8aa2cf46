"""Values Postgres cannot store, on both drivers: refused early, always as ValueError.

The contract suite pins that every adapter refuses them. What only the SQL
adapters can get wrong: sending a statement the server is bound to refuse,
poisoning the caller's transaction with it, and letting a driver's own error
type escape (psycopg refuses a NUL in text while binding, with no SQLSTATE).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from tests.integration.adapters.pg_store_support import StoreDriver, counted_store

from taskq.adapters.postgres.schema import Schema
from taskq.domain.job import NewJob
from taskq.ports.store_params import Heartbeat

pytestmark = pytest.mark.integration

UNSTORABLE = {
    "nul-actor": NewJob(actor="a\x00"),
    "nul-identity-key": NewJob(actor="a", identity_key="k\x00"),
    "nul-tag": NewJob(actor="a", tags=("\x00",)),
    "priority-past-int32": NewJob(actor="a", priority=2**31),
    "max-attempts-0": NewJob(actor="a", max_attempts=0),
}


@pytest.mark.parametrize("job", UNSTORABLE.values(), ids=UNSTORABLE.keys())
async def test_unstorable_job_sends_no_statement(schema: Schema, store: Any, job: NewJob) -> None:
    """A job with a NUL in its text or an integer out of range is refused before any statement."""
    counted, counting = counted_store(store, schema)
    with pytest.raises(ValueError, match=r"NUL|priority|max_attempts"):
        await counted.enqueue_many([NewJob(actor="a"), job])
    assert counting.calls == []
    assert await store.count_active() == 0


async def test_unstorable_bound_enqueue_leaves_the_callers_transaction_usable(
    driver: StoreDriver, dsn: str, store: Any
) -> None:
    """A refused bound enqueue raises ValueError and the caller's transaction still commits."""
    async with driver.caller_connection(dsn) as conn:
        async with conn.transaction():
            enqueuer = store.bound_to(conn)
            kept = await enqueuer.enqueue(NewJob(actor="a"))
            for job in UNSTORABLE.values():
                with pytest.raises(ValueError, match=r"NUL|priority|max_attempts"):
                    await enqueuer.enqueue(job)
            assert await driver.fetchval(conn, "SELECT 6 * 7") == 42
        assert await store.get(kept.job_id) is not None
        assert await store.count_active() == 1


async def test_nul_in_any_text_parameter_is_a_value_error(store: Any) -> None:
    """A NUL reaching the driver (here a heartbeat's worker id) is ValueError on both
    drivers, not theirs."""
    with pytest.raises(ValueError, match="Postgres cannot store a value"):
        await store.heartbeat(
            Heartbeat(worker_id="w\x00", lease=timedelta(seconds=30), is_leader=False)
        )
    assert await store.list_workers() == []
