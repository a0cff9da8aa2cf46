"""Job rows TaskQ did not write, on both drivers: a claim hands each over, never fails whole.

Another service, a migration or a hand-written INSERT can put a payload in ``jobs`` that
TaskQ would never write: a JSON array or string instead of an object, or JSON nested
deeper than Python's decoder goes. Before, the deep one made the claim that took it
raise RecursionError (the worker crashed, and every worker that reclaimed the job
after its lease crashed again), and the others became an empty payload unseen.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from taskq.adapters.postgres.schema import Schema
from taskq.domain.job import NewJob
from taskq.ports.store_params import ClaimRequest

pytestmark = pytest.mark.integration

DEEP = '{"n": 1, "x": ' + "[" * 3000 + "]" * 3000 + "}"
ROWS = {
    "deep payload": (DEEP, "{}", "the stored payload is nested too deeply to decode"),
    "array payload": ("[1, 2]", "{}", "the stored payload is an array, not a JSON object"),
    "string payload": ('"hi"', "{}", "the stored payload is a string, not a JSON object"),
    "null payload": ("null", "{}", "the stored payload is null, not a JSON object"),
    "deep metadata": ('{"n": 1}', DEEP, "the stored metadata is nested too deeply to decode"),
}


async def _insert(dsn: str, schema: Schema, payload: str, metadata: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        job_id: int = await conn.fetchval(
            f"INSERT INTO {schema.quoted}.jobs (queue, actor, payload, metadata, status) "
            "VALUES ('default', 'a', $1::text::jsonb, $2::text::jsonb, 'pending') RETURNING id",
            payload,
            metadata,
        )
    finally:
        await conn.close()
    return job_id


@pytest.mark.parametrize(("payload", "metadata", "why"), ROWS.values(), ids=ROWS.keys())
async def test_a_claim_hands_over_an_unreadable_row_saying_why(
    store: Any, schema: Schema, dsn: str, payload: str, metadata: str, why: str
) -> None:
    """The row between two ordinary jobs: the claim takes all three, the odd one with
    ``unreadable`` saying what is wrong, the others as ever."""
    before = (await store.enqueue(NewJob(actor="a", payload={"n": 0}))).job_id
    odd = await _insert(dsn, schema, payload, metadata)
    after = (await store.enqueue(NewJob(actor="a", payload={"n": 2}))).job_id
    claimed = await store.claim(
        ClaimRequest(
            worker_id="w", queues=["default"], actors=["a"], limit=10, lease=timedelta(seconds=30)
        )
    )
    by_id = {job.id: job for job in claimed}
    assert sorted(by_id) == [before, odd, after]
    assert by_id[odd].unreadable == why
    assert by_id[before].unreadable is None
    assert (by_id[before].payload, by_id[after].payload) == ({"n": 0}, {"n": 2})


async def test_reading_a_row_nested_too_deeply_names_the_job(
    store: Any, schema: Schema, dsn: str
) -> None:
    """``get`` of such a row raises ValueError naming the job, not a RecursionError."""
    odd = await _insert(dsn, schema, DEEP, "{}")
    with pytest.raises(ValueError, match=rf"job {odd}: .* nested too deeply"):
        await store.get(odd)
