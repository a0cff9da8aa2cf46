"""What only the memory adapter has: outage simulation, JSON fidelity, copies, the shared backend.

Port behaviour (claims, leases, sweeps, ...) is pinned by the contract suite
in ``contracts/``; these tests cover the adapter's own test controls and the
places where an in-memory store could silently differ from a database.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from taskq.adapters.memory import (
    MEMORY_CAPABILITIES,
    FakeClock,
    MemoryBackend,
    MemoryLeaderLock,
    MemoryNotifier,
    MemoryQueueStore,
    MemoryRateLimiter,
)
from taskq.domain.errors import RateLimitUnavailable, StoreUnavailable
from taskq.domain.job import NewJob
from taskq.domain.status import JobStatus
from taskq.ports.store_params import CAP_DURABLE, CAP_MULTI_PROCESS, ClaimRequest, Finish

if TYPE_CHECKING:
    from taskq.ports.leader_lock import LeaderLock
    from taskq.ports.notifier import Notifier
    from taskq.ports.queue_store import QueueStore
    from taskq.ports.rate_limiter import RateLimiter

    # mypy proves each class satisfies its port structurally.
    _backend = MemoryBackend(clock=FakeClock())
    _store: QueueStore = MemoryQueueStore(_backend)
    _lock: LeaderLock = MemoryLeaderLock(_backend)
    _notifier: Notifier = MemoryNotifier(_backend)
    _limiter: RateLimiter = MemoryRateLimiter(_backend)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def backend(clock: FakeClock) -> MemoryBackend:
    return MemoryBackend(clock=clock)


def _claim(worker: str = "w1") -> ClaimRequest:
    return ClaimRequest(
        worker_id=worker, queues=["default"], actors=["a"], limit=10, lease=timedelta(seconds=30)
    )


async def test_stores_of_one_backend_share_state_and_two_backends_do_not(
    backend: MemoryBackend, clock: FakeClock
) -> None:
    """Stores made from one backend see each other's jobs; another backend is another schema."""
    job_id = (await backend.store().enqueue(NewJob(actor="a"))).job_id
    assert (await backend.store().get(job_id)) is not None
    other = MemoryBackend(clock=clock).store()
    assert await other.get(job_id) is None


async def test_now_none_uses_the_backend_clock(backend: MemoryBackend, clock: FakeClock) -> None:
    """Without an explicit now, timestamps come from the backend's clock."""
    clock.advance(42)
    store = backend.store()
    job = await store.get((await store.enqueue(NewJob(actor="a"))).job_id)
    assert job is not None
    assert job.created_at == clock.now() == job.scheduled_at


async def test_naive_now_is_refused(backend: MemoryBackend) -> None:
    """A naive datetime as now is a caller bug, refused rather than compared wrongly."""
    with pytest.raises(ValueError, match="timezone-aware"):
        await backend.store().enqueue(
            NewJob(actor="a"), now=backend.clock.now().replace(tzinfo=None)
        )


async def test_json_values_come_back_as_a_json_column_would(backend: MemoryBackend) -> None:
    """Payload, metadata and result are stored as JSON: tuples read back as lists."""
    store = backend.store()
    job_id = (await store.enqueue(NewJob(actor="a", payload={"t": (1, 2)}))).job_id
    (claimed,) = await store.claim(_claim())
    await store.finish(Finish(lease=claimed.lease, status=JobStatus.SUCCEEDED, result=("x", 1)))
    job = await store.get(job_id)
    assert job is not None
    assert job.payload == {"t": [1, 2]}
    assert job.result == ["x", 1]


async def test_non_json_payload_refuses_the_whole_batch(backend: MemoryBackend) -> None:
    """A value JSON cannot hold fails the enqueue_many before any job is written."""
    store = backend.store()
    with pytest.raises(TypeError):
        await store.enqueue_many([NewJob(actor="a"), NewJob(actor="a", payload={"s": {1, 2}})])
    assert await store.count_active() == 0


async def test_reads_return_copies(backend: MemoryBackend) -> None:
    """Mutating a returned payload or the caller's own dict never changes the stored job."""
    store = backend.store()
    payload = {"items": [1]}
    job_id = (await store.enqueue(NewJob(actor="a", payload=payload))).job_id
    payload["items"].append(2)
    first = await store.get(job_id)
    assert first is not None
    first.payload["items"].append(3)
    again = await store.get(job_id)
    assert again is not None
    assert again.payload == {"items": [1]}


async def test_enqueue_many_publishes_one_wake_up(backend: MemoryBackend, clock: FakeClock) -> None:
    """A bulk enqueue publishes a single wake-up for the whole statement, not one per row."""
    notifier = backend.notifier()
    await notifier.start()
    received: list[str] = []
    notifier.subscribe(received.append)
    await backend.store().enqueue_many([NewJob(actor="a", queue="q") for _ in range(5)])
    await backend.store().enqueue_many([NewJob(actor="a", queue="x"), NewJob(actor="a")])
    await clock.run_until_idle()
    assert received == ["q", ""]
    assert backend.hub.published == 2


async def test_fully_deduplicated_enqueue_publishes_nothing(backend: MemoryBackend) -> None:
    """An enqueue that only returns an existing job wrote nothing, so it wakes nobody."""
    store = backend.store()
    await store.enqueue(NewJob(actor="a", identity_key="k"))
    await store.enqueue(NewJob(actor="a", identity_key="k"))
    assert backend.hub.published == 1


async def test_closed_store_raises_store_unavailable(backend: MemoryBackend) -> None:
    """After close() every store call raises StoreUnavailable; other stores keep working."""
    store, other = backend.store(), backend.store()
    await store.close()
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.ping()
    with pytest.raises(StoreUnavailable):
        await store.enqueue(NewJob(actor="a"))
    await other.ping()


async def test_one_store_partitioned_away(backend: MemoryBackend) -> None:
    """store.set_reachable(False) fails that store only, until it is reachable again."""
    partitioned, healthy = backend.store(), backend.store()
    partitioned.set_reachable(False)
    with pytest.raises(StoreUnavailable, match="unreachable"):
        await partitioned.claim(_claim())
    await healthy.enqueue(NewJob(actor="a"))
    partitioned.set_reachable(True)
    assert len(await partitioned.claim(_claim())) == 1


async def test_backend_outage_reaches_every_port(backend: MemoryBackend) -> None:
    """set_reachable(False) fails stores and limiters, drops the leader lock and listeners."""
    store, limiter = backend.store(), backend.rate_limiter()
    lock, notifier = backend.leader_lock(), backend.notifier()
    assert await lock.try_acquire()
    await notifier.start()
    job_id = (await store.enqueue(NewJob(actor="a"))).job_id

    backend.set_reachable(False)
    with pytest.raises(StoreUnavailable):
        await store.get(job_id)
    with pytest.raises(RateLimitUnavailable):
        await limiter.acquire_rate("k", limit=1, window=timedelta(seconds=1))
    with pytest.raises(StoreUnavailable):
        await backend.leader_lock().try_acquire()
    # The holder still believes it leads until it probes (held, probe, held).
    assert (lock.held, await lock.probe(), lock.held) == (True, False, False)
    assert (notifier.connected, await notifier.health_check()) == (False, False)

    backend.set_reachable(True)
    assert (await notifier.health_check(), notifier.connected) == (True, True)
    assert notifier.reconnects == 1
    assert await lock.try_acquire()
    assert await store.get(job_id) is not None


async def test_closed_rate_limiter_raises(backend: MemoryBackend) -> None:
    """A closed limiter refuses calls with RateLimitUnavailable."""
    limiter = backend.rate_limiter()
    await limiter.close()
    with pytest.raises(RateLimitUnavailable):
        await limiter.sweep_expired()


async def test_capabilities_say_not_durable_and_single_process(backend: MemoryBackend) -> None:
    """Memory declares notify and leader-lock support but neither durability nor multi-process."""
    caps = backend.store().capabilities
    assert caps == MEMORY_CAPABILITIES
    assert CAP_DURABLE not in caps
    assert CAP_MULTI_PROCESS not in caps


async def test_store_calls_yield_to_the_loop(backend: MemoryBackend) -> None:
    """Each store call is an await point, so concurrent callers interleave between calls."""
    store = backend.store()
    order: list[str] = []

    async def other() -> None:
        order.append("other")

    task = asyncio.create_task(other())
    await store.ping()
    order.append("ping done")
    await task
    assert order == ["other", "ping done"]
