"""Job ids no job can have: reads find nothing, cancels raise JobNotFound, non-ints TypeError.

Postgres ids are bigints; an id outside that range used to fail as "Postgres cannot
store a value" (a ValueError for a read), where the memory adapter found nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from taskq.domain.errors import JobNotFound
from taskq.testing.harness import Harness

BEYOND_BIGINT = [2**63, -(2**63) - 1, 10**30]


@pytest.mark.parametrize("job_id", BEYOND_BIGINT, ids=str)
async def test_an_id_beyond_bigint_finds_nothing(harness: Harness, job_id: int) -> None:
    store = harness.store
    assert await store.get(job_id) is None
    assert await store.attempts(job_id) == []
    with pytest.raises(JobNotFound):
        await store.request_cancel(job_id)


@pytest.mark.parametrize("job_id", ["abc", "1", 1.0, None, True], ids=repr)
async def test_an_id_that_is_not_an_int_is_a_type_error(harness: Harness, job_id: Any) -> None:
    store = harness.store
    for call in (store.get, store.attempts, store.request_cancel):
        with pytest.raises(TypeError, match="job_id must be an int"):
            await call(job_id)
