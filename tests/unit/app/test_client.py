"""JobsClient and JobHandle on the memory adapter: enqueue, bulk, transactions, wait."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from taskq.adapters.memory import FakeClock, MemoryBackend, MemoryQueueStore
from taskq.app import composition
from taskq.app.actors import ActorRef, actor
from taskq.app.client import JobsClient
from taskq.app.handle import JobHandle
from taskq.app.settings import TaskQSettings
from taskq.domain.errors import (
    ConfigurationError,
    InvalidIdentifierError,
    JobFailed,
    JobNotFound,
    MaxPendingExceeded,
    PayloadValidationError,
    StoreUnavailable,
)
from taskq.domain.job import EnqueueResult, NewJob
from taskq.domain.retry import RetryPolicy
from taskq.domain.status import JobStatus
from taskq.ports.store_params import ClaimRequest, Finish


class Order(BaseModel):
    order_id: int
    note: str = ""


class Invoice(BaseModel):
    total: int


@actor(queue="billing")
async def bill(payload: Order) -> Invoice:
    return Invoice(total=payload.order_id * 10)


@actor
async def notify(payload: Order) -> None: ...


@actor(max_pending=1)
async def limited(payload: Order) -> None: ...


@actor(retry=RetryPolicy(kind="indefinite", time_budget=timedelta(minutes=30)))
async def patient(payload: Order) -> None: ...


@actor(result_ttl=timedelta(minutes=1))
async def short_lived(payload: Order) -> Invoice:
    return Invoice(total=1)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def backend(clock: FakeClock) -> MemoryBackend:
    return MemoryBackend(clock=clock)


@pytest.fixture
async def client(backend: MemoryBackend, clock: FakeClock) -> AsyncIterator[JobsClient]:
    async with JobsClient(backend.store(), clock=clock) as jobs_client:
        yield jobs_client


async def run_worker(
    backend: MemoryBackend,
    ref: ActorRef[Any, Any],
    *,
    result: object = None,
    status: JobStatus = JobStatus.SUCCEEDED,
    error: str | None = None,
) -> int:
    """Play a worker: claim the actor's due jobs and finish them through the store."""
    store = backend.store()
    claimed = await store.claim(
        ClaimRequest(
            worker_id="worker-1",
            queues=[ref.queue],
            actors=[ref.name],
            limit=100,
            lease=timedelta(seconds=60),
        )
    )
    for job in claimed:
        await store.finish(
            Finish(
                lease=job.lease,
                status=status,
                result=ref.dump_result(result) if status is JobStatus.SUCCEEDED else None,
                error=error,
                error_class="LookupError" if error else None,
                result_ttl=ref.result_ttl,
            )
        )
    return len(claimed)


# ----------------------------------------------------------------- enqueue


async def test_enqueue_writes_a_pending_job(client: JobsClient) -> None:
    """enqueue stores the dumped payload on the actor's queue and returns a handle."""
    handle = await client.enqueue(bill, Order(order_id=7))
    assert isinstance(handle, JobHandle)
    assert handle.was_existing is False
    job = await client.get(handle.job_id)
    assert job is not None
    assert (job.actor, job.queue, job.status) == ("bill", "billing", JobStatus.PENDING)
    assert dict(job.payload) == {"order_id": 7, "note": ""}
    assert job.max_attempts == 3


async def test_enqueue_accepts_dict_payloads_and_options(
    client: JobsClient, clock: FakeClock
) -> None:
    """A dict payload, queue override, priority, metadata and tags are stored as given."""
    later = clock.now() + timedelta(hours=1)
    handle = await client.enqueue(
        notify,
        {"order_id": "3"},
        queue="urgent",
        priority=9,
        scheduled_at=later,
        metadata={"source": "api"},
        tags=["vip"],
        fairness_key="tenant-1",
    )
    job = await client.get(handle.job_id)
    assert job is not None
    assert dict(job.payload) == {"order_id": 3, "note": ""}
    assert (job.queue, job.priority, job.status) == ("urgent", 9, JobStatus.SCHEDULED)
    assert job.scheduled_at == later
    assert dict(job.metadata) == {"source": "api"}
    assert job.tags == ("vip",)
    assert job.fairness_key == "tenant-1"


async def test_invalid_payload_writes_nothing(client: JobsClient) -> None:
    """A payload that does not validate raises PayloadValidationError before any write."""
    with pytest.raises(PayloadValidationError, match="order_id"):
        await client.enqueue(bill, {"order_id": "not a number"})
    assert await client.store.count_active() == 0


async def test_enqueue_needs_an_actor_ref(client: JobsClient) -> None:
    """An actor name string is refused: the client needs the payload model."""
    with pytest.raises(TypeError, match="needs an ActorRef"):
        await client.enqueue("bill", {"order_id": 1})  # type: ignore[arg-type]


async def test_identity_key_returns_the_existing_job(client: JobsClient) -> None:
    """A second enqueue with a live identity key returns the first job, marked existing."""
    first = await client.enqueue(bill, Order(order_id=1), identity_key="order-1")
    second = await client.enqueue(bill, Order(order_id=1), identity_key="order-1")
    assert second.was_existing is True
    assert second.job_id == first.job_id


async def test_time_budget_becomes_the_deadline_on_the_client_clock(
    client: JobsClient, clock: FakeClock
) -> None:
    """An indefinite policy's time_budget is stamped from the client's clock."""
    handle = await client.enqueue(patient, Order(order_id=1))
    job = await client.get(handle.job_id)
    assert job is not None
    assert job.schedule_to_close == clock.now() + timedelta(minutes=30)
    assert job.max_attempts is None


async def test_max_pending_refusal_reaches_the_caller(client: JobsClient) -> None:
    """The actor's max_pending literal travels with the job and the store enforces it."""
    await client.enqueue(limited, Order(order_id=1))
    with pytest.raises(MaxPendingExceeded):
        await client.enqueue(limited, Order(order_id=2))


class CountingStore(MemoryQueueStore):
    """A memory store that counts enqueue round trips."""

    calls: list[int]

    async def enqueue(self, job: NewJob, *, now: datetime | None = None) -> EnqueueResult:
        self.calls.append(1)
        return await super().enqueue(job, now=now)

    async def enqueue_many(
        self, jobs: Sequence[NewJob], *, now: datetime | None = None
    ) -> list[EnqueueResult]:
        self.calls.append(len(jobs))
        return await super().enqueue_many(jobs, now=now)


def counting_store(backend: MemoryBackend) -> CountingStore:
    store = CountingStore(backend)
    store.calls = []
    return store


async def test_enqueue_many_is_one_round_trip_in_order(backend: MemoryBackend) -> None:
    """enqueue_many writes every job in one store call and returns handles in input order."""
    store = counting_store(backend)
    client = JobsClient(store)
    handles = await client.enqueue_many(bill, [Order(order_id=i) for i in range(5)])
    assert store.calls == [5]
    payloads = []
    for handle in handles:
        job = await client.get(handle.job_id)
        assert job is not None
        payloads.append(job.payload["order_id"])
    assert payloads == [0, 1, 2, 3, 4]


async def test_enqueue_many_handles_are_full_handles(
    client: JobsClient, backend: MemoryBackend
) -> None:
    """Each handle of a batch is what enqueue returns: its job's id, was_existing from
    the store, and wait() on the client's clock and store with the actor's result type."""
    first = await client.enqueue(bill, Order(order_id=7), idempotency_key="k7")
    handles = await client.enqueue_many(bill, [{"order_id": 1}, {"order_id": 2}])
    again = await client.enqueue_many(bill, [Order(order_id=7)], idempotency_key="k7")
    assert [type(h) for h in handles] == [JobHandle, JobHandle]
    assert [h.was_existing for h in handles] == [False, False]
    assert (again[0].job_id, again[0].was_existing) == (first.job_id, True)
    assert handles[0].job_id != handles[1].job_id
    assert all(h.actor is bill for h in [*handles, *again])
    assert repr(handles[0]) == f"<JobHandle 'bill' job_id={handles[0].job_id}>"
    assert await handles[1].status() is JobStatus.PENDING
    await run_worker(backend, bill, result=Invoice(total=20))
    assert await handles[1].wait(timeout=1) == Invoice(total=20)


async def test_enqueue_many_validates_everything_first(backend: MemoryBackend) -> None:
    """One bad payload refuses the whole batch before any write, naming its index."""
    store = counting_store(backend)
    client = JobsClient(store)
    with pytest.raises(PayloadValidationError, match="payload #2"):
        await client.enqueue_many(bill, [{"order_id": 1}, {"order_id": 2}, {"order_id": "x"}])
    assert store.calls == []
    assert await store.count_active() == 0


async def test_enqueue_many_of_nothing_makes_no_call(backend: MemoryBackend) -> None:
    """An empty batch returns no handles without touching the store."""
    store = counting_store(backend)
    assert await JobsClient(store).enqueue_many(bill, []) == []
    assert store.calls == []


async def test_enqueue_many_refuses_a_single_payload(client: JobsClient) -> None:
    """Passing one payload (a mapping or model) to enqueue_many is a TypeError."""
    with pytest.raises(TypeError, match="sequence of payloads"):
        await client.enqueue_many(bill, Order(order_id=1))  # type: ignore[arg-type]


# ----------------------------------------------------------------- caller transactions


class BindingStore(MemoryQueueStore):
    """A memory store that records which caller connection enqueues were bound to."""

    bound: list[object]

    def bound_to(self, connection: object) -> MemoryQueueStore:
        self.bound.append(connection)
        return self


async def test_connection_enqueues_through_bound_to(backend: MemoryBackend) -> None:
    """connection= routes enqueue and enqueue_many through store.bound_to(connection)."""
    store = BindingStore(backend)
    store.bound = []
    client = JobsClient(store)
    conn = object()
    one = await client.enqueue(bill, Order(order_id=1), connection=conn)
    many = await client.enqueue_many(bill, [Order(order_id=2)], connection=conn)
    assert store.bound == [conn, conn]
    assert await client.get(one.job_id) is not None
    assert await client.get(many[0].job_id) is not None


async def test_connection_needs_a_store_that_can_bind(client: JobsClient) -> None:
    """A store without bound_to cannot enqueue in a caller's transaction: nothing is written."""
    with pytest.raises(ConfigurationError, match="caller's transaction"):
        await client.enqueue(bill, Order(order_id=1), connection=object())
    assert await client.store.count_active() == 0


# ----------------------------------------------------------------- handles and waiting


async def test_wait_returns_the_typed_result(
    client: JobsClient, backend: MemoryBackend, clock: FakeClock
) -> None:
    """wait() polls until a worker finishes the job and returns the actor's result type."""
    handle = await client.enqueue(bill, Order(order_id=4))
    waiter = asyncio.create_task(handle.wait(timeout=60))
    await clock.advance_async(1)
    assert not waiter.done()
    assert await run_worker(backend, bill, result=Invoice(total=40)) == 1
    await clock.advance_async(1)
    assert await waiter == Invoice(total=40)


async def test_wait_returns_none_for_none_actors(
    client: JobsClient, backend: MemoryBackend
) -> None:
    """A finished -> None actor's wait() returns None."""
    handle = await client.enqueue(notify, Order(order_id=1))
    await run_worker(backend, notify)
    assert await handle.wait() is None  # type: ignore[func-returns-value]


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (JobStatus.FAILED, "LookupError: no such order"),
        (JobStatus.CRASHED, "worker died"),
        (JobStatus.ABANDONED, "shutdown"),
    ],
)
async def test_wait_raises_job_failed(
    client: JobsClient, backend: MemoryBackend, status: JobStatus, error: str
) -> None:
    """A job that ended in failure raises JobFailed with its status and recorded error."""
    handle = await client.enqueue(bill, Order(order_id=1))
    await run_worker(backend, bill, status=status, error=error)
    with pytest.raises(JobFailed) as info:
        await handle.wait()
    assert (info.value.job_id, info.value.status, info.value.error) == (
        handle.job_id,
        status.value,
        error,
    )


async def test_cancelled_job_wait_raises_job_failed(client: JobsClient) -> None:
    """Cancelling a pending job through the handle cancels it; wait() then raises JobFailed."""
    handle = await client.enqueue(bill, Order(order_id=1))
    assert await handle.cancel() is JobStatus.CANCELLED
    assert await handle.status() is JobStatus.CANCELLED
    with pytest.raises(JobFailed, match="cancelled"):
        await handle.wait()


async def test_wait_times_out_on_the_clock(client: JobsClient, clock: FakeClock) -> None:
    """wait(timeout=...) raises TimeoutError once that much clock time passed; the job stays."""
    handle = await client.enqueue(bill, Order(order_id=1))
    waiter = asyncio.create_task(handle.wait(timeout=2.0))
    await clock.advance_async(1.9)
    assert not waiter.done()
    await clock.advance_async(0.2)
    with pytest.raises(TimeoutError, match="still pending"):
        await waiter
    assert await handle.status() is JobStatus.PENDING


class RecordingClock(FakeClock):
    """A fake clock whose sleeps advance time themselves and are recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[float] = []
        self.on_sleep: list[Any] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        for hook in self.on_sleep:
            await hook(len(self.sleeps))
        await asyncio.sleep(0)


async def test_wait_backoff_starts_small_doubles_and_is_capped() -> None:
    """Polls start at 5 ms and double up to poll_interval."""
    clock = RecordingClock()
    backend = MemoryBackend(clock=clock)
    client = JobsClient(backend.store(), clock=clock)
    handle = await client.enqueue(bill, Order(order_id=1))

    async def finish_after_seven(count: int) -> None:
        if count == 7:
            await run_worker(backend, bill, result=Invoice(total=1))

    clock.on_sleep.append(finish_after_seven)
    assert await handle.wait(poll_interval=0.05) == Invoice(total=1)
    assert clock.sleeps == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.05, 0.05, 0.05])


async def test_wait_never_sleeps_past_the_timeout() -> None:
    """The last poll sleep is shortened to end exactly at the timeout."""
    clock = RecordingClock()
    client = JobsClient(MemoryBackend(clock=clock).store(), clock=clock)
    handle = await client.enqueue(bill, Order(order_id=1))
    with pytest.raises(TimeoutError):
        await handle.wait(timeout=0.1, poll_interval=1.0)
    assert sum(clock.sleeps) == pytest.approx(0.1)
    assert clock.sleeps[-1] == pytest.approx(0.1 - 0.075)


async def test_wait_refuses_bad_arguments(client: JobsClient) -> None:
    """A non-positive poll interval or a negative timeout is a ValueError."""
    handle = await client.enqueue(bill, Order(order_id=1))
    with pytest.raises(ValueError, match="poll_interval"):
        await handle.wait(poll_interval=0)
    with pytest.raises(ValueError, match="timeout"):
        await handle.wait(timeout=-1)


async def test_expired_result_is_reported_as_expired(
    client: JobsClient, backend: MemoryBackend, clock: FakeClock
) -> None:
    """wait() on a job whose result TTL passed says the result expired."""
    handle = await client.enqueue(short_lived, Order(order_id=1))
    await run_worker(backend, short_lived, result=Invoice(total=1))
    clock.advance(120)
    assert await backend.store().expire_results() == 1
    with pytest.raises(ValueError, match="expired"):
        await handle.wait()


async def test_unknown_job_raises_job_not_found(client: JobsClient) -> None:
    """A handle for a job that does not exist raises JobNotFound from status() and wait()."""
    handle = client.handle(bill, 999)
    with pytest.raises(JobNotFound):
        await handle.status()
    with pytest.raises(JobNotFound):
        await handle.wait()
    with pytest.raises(JobNotFound):
        await client.cancel(999)
    assert await client.get(999) is None


async def test_handle_reattaches_by_id(client: JobsClient, backend: MemoryBackend) -> None:
    """client.handle(ref, job_id) follows a job enqueued earlier."""
    job_id = (await client.enqueue(bill, Order(order_id=2))).job_id
    await run_worker(backend, bill, result=Invoice(total=20))
    assert await client.handle(bill, job_id).wait() == Invoice(total=20)


# ----------------------------------------------------------------- ownership and wiring


async def test_owned_store_is_closed_with_the_client(backend: MemoryBackend) -> None:
    """owns_store=True closes the store on exit; the default leaves it open."""
    owned, borrowed = backend.store(), backend.store()
    async with JobsClient(owned, owns_store=True):
        pass
    async with JobsClient(borrowed):
        pass
    with pytest.raises(StoreUnavailable):
        await owned.get(1)
    assert await borrowed.get(1) is None


async def test_connect_opens_and_closes_a_store_from_settings(
    backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """connect() builds validated settings with its overrides and owns the store it opens."""
    opened: list[TaskQSettings] = []
    store = backend.store()

    async def open_store(settings: TaskQSettings) -> MemoryQueueStore:
        opened.append(settings)
        return store

    monkeypatch.setattr(composition, "open_store", open_store, raising=False)
    base = TaskQSettings.load_from_dict({"pg_dsn": "postgresql://a:b@h1/db1"})
    async with JobsClient.connect(
        "postgresql://a:b@h2/db2", driver="psycopg", schema="jobs", settings=base
    ) as client:
        assert client.store is store
        await client.enqueue(bill, Order(order_id=1))
    assert [(s.pg_dsn, s.driver, s.schema_name) for s in opened] == [
        ("postgresql://a:b@h2/db2", "psycopg", "jobs")
    ]
    with pytest.raises(StoreUnavailable):
        await store.get(1)


async def test_connect_reads_the_environment_by_default(
    backend: MemoryBackend,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    """Without settings, connect() loads TASKQ_* from the environment."""
    opened: list[TaskQSettings] = []

    async def open_store(settings: TaskQSettings) -> MemoryQueueStore:
        opened.append(settings)
        return backend.store()

    monkeypatch.setattr(composition, "open_store", open_store, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("TASKQ_SCHEMA_NAME", "from_env")
    async with JobsClient.connect():
        pass
    assert opened[0].schema_name == "from_env"


async def test_connect_refuses_bad_overrides_before_opening(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An invalid schema override is a ConfigurationError and no store is opened."""
    opened: list[object] = []

    async def open_store(settings: TaskQSettings) -> object:
        opened.append(settings)
        raise AssertionError("must not be called")

    monkeypatch.setattr(composition, "open_store", open_store, raising=False)
    base = TaskQSettings.load_from_dict({})
    with pytest.raises(ConfigurationError, match="TASKQ_SCHEMA_NAME"):
        async with JobsClient.connect(schema="Bad-Name", settings=base):
            pytest.fail("must not connect")
    assert opened == []


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg"])
async def test_from_pool_wraps_a_caller_owned_pool(
    driver: str, backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """from_<driver>_pool hands the pool, driver, schema and call bound to composition;
    closing the client closes the store it built (sending owed wake-ups), which leaves
    the pool open."""
    calls: list[tuple[object, str, str, float]] = []
    store = backend.store()

    def store_from_pool(
        pool: object, *, driver: str, schema: str, call_timeout: float
    ) -> MemoryQueueStore:
        calls.append((pool, driver, schema, call_timeout))
        return store

    monkeypatch.setattr(composition, "store_from_pool", store_from_pool, raising=False)
    pool = object()
    make = JobsClient.from_asyncpg_pool if driver == "asyncpg" else JobsClient.from_psycopg_pool
    async with make(pool, schema="app_jobs") as client:
        assert client.store is store
    assert calls == [(pool, driver, "app_jobs", 10.0)]
    with pytest.raises(StoreUnavailable, match="closed"):
        await store.get(1)


async def test_from_pool_validates_the_schema_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schema that is not a safe identifier is refused before composition is called."""

    def store_from_pool(pool: object, *, driver: str, schema: str, call_timeout: float) -> object:
        raise AssertionError("must not be called")

    monkeypatch.setattr(composition, "store_from_pool", store_from_pool, raising=False)
    with pytest.raises(InvalidIdentifierError):
        JobsClient.from_asyncpg_pool(object(), schema="x; drop table jobs")
