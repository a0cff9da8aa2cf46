"""A failed claim is retried within a fraction of a second, then less and less often."""

from __future__ import annotations

from pydantic import BaseModel
from tests.unit.app.worker.harness import StoreProxy, WorkerRun, job, make_settings

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app.actors import actor
from taskq.app.worker.producer import CLAIM_RETRY_INITIAL
from taskq.domain.errors import StoreUnavailable
from taskq.domain.job import ClaimedJob
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest

#: Polls this far apart never start a job within a test's few seconds.
SLOW_POLL = 60.0


class Item(BaseModel):
    n: int


@actor
async def noop(payload: Item) -> None:
    return None


class FailingClaims(StoreProxy):
    """The memory store whose next ``fail`` claims raise StoreUnavailable (a dead connection)."""

    def __init__(self, inner: MemoryQueueStore, clock: FakeClock, fail: int) -> None:
        super().__init__(inner)
        self.clock = clock
        self.fail = fail
        self.failed_at: list[float] = []

    async def claim(self, request: ClaimRequest) -> list[ClaimedJob]:
        if self.fail > 0:
            self.fail -= 1
            self.failed_at.append(self.clock.monotonic())
            raise StoreUnavailable("connection was closed in the middle of operation")
        jobs: list[ClaimedJob] = await self._inner.claim(request)
        return jobs


async def test_a_claim_that_fails_once_is_retried_at_once_not_at_the_next_poll(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """The claim a wake-up triggers fails (a connection the server had just closed): the
    job still starts CLAIM_RETRY_INITIAL later, not a poll interval later."""
    store = FailingClaims(backend.store(), clock, fail=0)
    settings = make_settings(notify_poll_interval=SLOW_POLL)
    run = WorkerRun(backend, clock, {"noop": noop}, settings, store=store)
    await run.start()
    store.fail = 1
    job_id = (await client.enqueue(noop.new_job({"n": 1}, now=clock.now()))).job_id
    await clock.run_until_idle()
    assert len(store.failed_at) == 1
    assert (await job(client, job_id)).status is JobStatus.PENDING
    await run.advance(CLAIM_RETRY_INITIAL)
    assert (await job(client, job_id)).status is JobStatus.SUCCEEDED
    assert await run.stop() == 0


async def test_claims_failing_in_a_row_back_off_to_the_poll_interval(
    backend: MemoryBackend, clock: FakeClock, client: MemoryQueueStore
) -> None:
    """While claims keep failing the retries double from CLAIM_RETRY_INITIAL and settle at
    the poll interval; the first success resets the schedule."""
    poll = 5.0
    store = FailingClaims(backend.store(), clock, fail=0)
    run = WorkerRun(
        backend, clock, {"noop": noop}, make_settings(notify_poll_interval=poll), store=store
    )
    await run.start()
    store.fail = 9
    await client.enqueue(noop.new_job({"n": 1}, now=clock.now()))
    await run.advance(30)
    gaps = [round(b - a, 6) for a, b in zip(store.failed_at, store.failed_at[1:], strict=False)]
    assert gaps == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    assert (await job(client, 1)).status is JobStatus.SUCCEEDED
    store.fail = 2
    await client.enqueue(noop.new_job({"n": 2}, now=clock.now()))
    await run.advance(1)
    assert round(store.failed_at[-1] - store.failed_at[-2], 6) == CLAIM_RETRY_INITIAL
    assert (await job(client, 2)).status is JobStatus.SUCCEEDED
    assert await run.stop() == 0
