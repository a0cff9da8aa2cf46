"""A closed store refuses every call with ``StoreClosed``: not an outage to wait out."""

from __future__ import annotations

import pytest

from taskq.domain.errors import StoreClosed, StoreUnavailable
from taskq.testing.harness import Harness

from .helpers import at, new_job


async def test_a_closed_store_raises_store_closed_on_reads_writes_and_cancels(
    harness: Harness,
) -> None:
    """``StoreClosed`` (a ``StoreUnavailable``) lets a caller stop retrying at once."""
    store = await harness.open_store()
    job_id = (await store.enqueue(new_job(), now=at(0))).job_id
    await store.close()
    await store.close()  # idempotent
    for call in (
        store.get(job_id),
        store.request_cancel(job_id),
        store.enqueue(new_job(), now=at(1)),
    ):
        with pytest.raises(StoreClosed, match="closed") as caught:
            await call
        assert isinstance(caught.value, StoreUnavailable)
