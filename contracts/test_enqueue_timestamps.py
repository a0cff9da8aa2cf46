"""A timestamp whose UTC time is outside years 1..9999 is refused by every adapter.

Postgres stores it, but no reader can load it back: ``get`` then raised a raw
OverflowError (asyncpg) or ValueError (psycopg), and a worker claiming the job
crashed. The refusal names the field and stores nothing, singly or in a batch.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from taskq.testing.harness import EPOCH, Harness

from .helpers import get, new_job

#: 9999-12-31 23:59:59.999999 at UTC-14: 10000-01-01 13:59 in UTC.
AFTER_9999 = datetime.max.replace(tzinfo=timezone(timedelta(hours=-14)))
#: 0001-01-01 00:00 at UTC+14: year 0 in UTC.
BEFORE_1 = datetime.min.replace(tzinfo=timezone(timedelta(hours=14)))


@pytest.mark.parametrize("field", ["scheduled_at", "schedule_to_close"])
@pytest.mark.parametrize("value", [AFTER_9999, BEFORE_1], ids=["after-9999", "before-1"])
@pytest.mark.parametrize("size", [1, 250], ids=["one", "bulk"])
async def test_a_time_outside_years_1_to_9999_in_utc_is_refused(
    harness: Harness, field: str, value: datetime, size: int
) -> None:
    store = harness.store
    fields: dict[str, Any] = {field: value}
    bad = new_job(**fields)
    jobs = [new_job(payload={"i": i}) for i in range(size - 1)]
    call = (
        store.enqueue(bad, now=EPOCH) if size == 1 else store.enqueue_many([*jobs, bad], now=EPOCH)
    )
    with pytest.raises(ValueError, match=rf"NewJob\.{field} .*outside years 1\.\.9999 in UTC"):
        await call
    assert await store.count_active() == 0


async def test_the_last_second_of_9999_in_utc_is_stored(harness: Harness) -> None:
    # Not datetime.max itself: asyncpg writes that as 'infinity' (not read back aware).
    last = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    job_id = (await harness.store.enqueue(new_job(scheduled_at=last), now=EPOCH)).job_id
    assert (await get(harness.store, job_id)).scheduled_at == last
