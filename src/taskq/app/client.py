"""JobsClient: enqueue jobs from application code and follow them.

Three ways to get one, by who owns the database connections:

- ``async with JobsClient.connect() as client`` — TaskQ opens (and closes) its
  own pool from ``TASKQ_*`` settings;
- ``JobsClient.from_asyncpg_pool(pool)`` / ``from_psycopg_pool(pool)`` — your
  pool, which TaskQ uses and never closes;
- ``JobsClient(store)`` — any store (the memory adapter in tests).

``enqueue(..., connection=conn)`` writes the job inside *your* open
transaction (asyncpg or psycopg connection): it becomes visible, and wakes
workers, only if you commit. Payloads are validated against the actor's model
before anything is written (``PayloadValidationError``).

Each enqueue call runs in an OpenTelemetry PRODUCER span whose context the
job stores, when an SDK is configured (``taskq.app.observability.tracing``); the
OpenTelemetry API is imported when the first client is built, not by
``import taskq``.

Only ``taskq.app.composition`` names concrete adapters; it is imported lazily
so that ``import taskq`` loads no database driver.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, Self, TypeVar, Unpack, cast

from pydantic import BaseModel

from taskq.app.actors.enqueue_options import EnqueueArgs, EnqueueOptions
from taskq.app.actors.ref import ActorRef
from taskq.app.handle import JobHandle, WallClock
from taskq.app.port_check import check_methods
from taskq.app.unstorable import unstorable_error
from taskq.domain.errors import ConfigurationError, PayloadValidationError
from taskq.domain.job import (
    AttemptRecord,
    EnqueueResult,
    Job,
    UniformJobs,
    job_id_can_exist,
)
from taskq.domain.lock_budget import DEFAULT_CLIENT_CALL_TIMEOUT
from taskq.domain.settings_rules import validate_identifier
from taskq.domain.status import JobStatus
from taskq.ports.clock import Clock
from taskq.ports.queue_store import JobCanceller, JobEnqueuer, JobReader

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from taskq.app.observability.tracing import Tracing
    from taskq.app.settings import TaskQSettings

P = TypeVar("P", bound=BaseModel)
R = TypeVar("R")

Driver = Literal["asyncpg", "psycopg"]


class ClientStore(JobEnqueuer, JobReader, JobCanceller, Protocol):
    """The store roles a client uses (any ``QueueStore`` has them)."""

    async def close(self) -> None: ...


#: What the client and its handles call on the store (``bound_to`` is optional).
CLIENT_STORE_METHODS: Final = ("enqueue", "enqueue_many", "get", "request_cancel", "close")


class TransactionBinding(Protocol):
    """A store that can enqueue on a caller's connection, inside its transaction."""

    def bound_to(self, connection: Any, /) -> JobEnqueuer: ...


class CompositionRoot(Protocol):
    """The functions of ``taskq.app.composition`` the client calls."""

    async def open_store(self, settings: TaskQSettings, /) -> ClientStore:
        """A store on its own new pool, built from ``settings``; ``close()`` closes the pool."""
        ...

    def store_from_pool(
        self, pool: Any, /, *, driver: Driver, schema: str, call_timeout: float
    ) -> ClientStore:
        """A store on a caller-owned pool, each call bounded by ``call_timeout`` seconds;
        it never closes the pool."""
        ...


def _composition() -> CompositionRoot:
    from taskq.app import composition

    return cast(CompositionRoot, composition)


def _check_ref(ref: object) -> None:
    if not isinstance(ref, ActorRef):
        raise TypeError(
            f"enqueue needs an ActorRef (the @actor-decorated function), got {ref!r}; "
            "actor names are not supported because the client validates the payload "
            "against the actor's model"
        )


class JobsClient:
    """Enqueue jobs, read them, cancel them.

    ``owns_store``: close the store when the client closes (``aclose`` or the
    end of ``async with``). ``clock`` is the time an enqueue is stamped with
    (an indefinite policy's ``time_budget`` deadline) and the time
    ``JobHandle.wait`` polls on; give tests the store's fake clock.
    ``otel_enabled=False`` (``TASKQ_OTEL_ENABLED`` for ``connect``) makes no
    span and stores no trace context but the ids a call passes;
    ``tracer_provider`` is where the PRODUCER spans go instead of the global
    provider.
    """

    def __init__(
        self,
        store: ClientStore,
        *,
        owns_store: bool = False,
        clock: Clock | None = None,
        otel_enabled: bool = True,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        check_methods("the client's store", store, CLIENT_STORE_METHODS)
        self._store = store
        self._owns_store = owns_store
        self._clock: Clock = clock if clock is not None else WallClock()
        self._closed = False
        self._tracing: Tracing | None = None
        if otel_enabled:
            from taskq.app.observability.tracing import Tracing

            self._tracing = Tracing(tracer_provider)

    def __repr__(self) -> str:
        owned = " owned" if self._owns_store else ""
        return f"<JobsClient{owned} store={self._store!r}>"

    # -- construction -----------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        dsn: str | None = None,
        *,
        driver: str | None = None,
        schema: str | None = None,
        settings: TaskQSettings | None = None,
        clock: Clock | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> contextlib.AbstractAsyncContextManager[Self]:
        """``async with JobsClient.connect() as client``: a client on its own pool.

        Settings come from ``settings`` or else ``TaskQSettings.load()``
        (environment and ``.env``); ``dsn``, ``driver`` and ``schema`` override
        ``TASKQ_PG_DSN``, ``TASKQ_DRIVER`` and ``TASKQ_SCHEMA_NAME``, validated
        the same way (``TASKQ_OTEL_ENABLED`` too: see the constructor). The pool
        is opened on entry and closed on exit. Entry raises ``SchemaNotMigrated``,
        naming the missing migrations, when the schema is behind this TaskQ.
        """
        return cls._connected(
            dsn,
            driver=driver,
            schema=schema,
            settings=settings,
            clock=clock,
            tracer_provider=tracer_provider,
        )

    @classmethod
    @contextlib.asynccontextmanager
    async def _connected(
        cls,
        dsn: str | None,
        *,
        driver: str | None,
        schema: str | None,
        settings: TaskQSettings | None,
        clock: Clock | None,
        tracer_provider: TracerProvider | None,
    ) -> AsyncIterator[Self]:
        from taskq.app.settings import TaskQSettings

        base = settings if settings is not None else TaskQSettings.load()
        changes = {
            field: value
            for field, value in (("pg_dsn", dsn), ("driver", driver), ("schema_name", schema))
            if value is not None
        }
        resolved = base.with_overrides(**changes) if changes else base
        store = await _composition().open_store(resolved)
        async with cls(
            store,
            owns_store=True,
            clock=clock,
            otel_enabled=resolved.otel_enabled,
            tracer_provider=tracer_provider,
        ) as client:
            yield client

    @classmethod
    def from_asyncpg_pool(
        cls,
        pool: Any,
        *,
        schema: str = "taskq",
        clock: Clock | None = None,
        call_timeout: float = DEFAULT_CLIENT_CALL_TIMEOUT,
        otel_enabled: bool = True,
        tracer_provider: TracerProvider | None = None,
    ) -> Self:
        """A client on your ``asyncpg.Pool``; TaskQ never closes it (closing the client
        sends the wake-ups its enqueues still owe, then refuses further calls).

        Each call ends within ``call_timeout`` seconds (see ``TASKQ_CLIENT_CALL_TIMEOUT``);
        the pool's own settings are left as they are. The first call checks the
        schema as ``connect`` does (``SchemaNotMigrated``). ``otel_enabled``,
        ``tracer_provider``: as for the constructor.
        """
        return cls._from_pool(
            pool,
            driver="asyncpg",
            schema=schema,
            clock=clock,
            call_timeout=call_timeout,
            otel_enabled=otel_enabled,
            tracer_provider=tracer_provider,
        )

    @classmethod
    def from_psycopg_pool(
        cls,
        pool: Any,
        *,
        schema: str = "taskq",
        clock: Clock | None = None,
        call_timeout: float = DEFAULT_CLIENT_CALL_TIMEOUT,
        otel_enabled: bool = True,
        tracer_provider: TracerProvider | None = None,
    ) -> Self:
        """A client on your ``psycopg_pool.AsyncConnectionPool``; TaskQ never closes it
        (closing the client sends the wake-ups its enqueues still owe).

        Each call ends within ``call_timeout`` seconds (see ``TASKQ_CLIENT_CALL_TIMEOUT``);
        the pool's own settings are left as they are. The first call checks the
        schema as ``connect`` does (``SchemaNotMigrated``). ``otel_enabled``,
        ``tracer_provider``: as for the constructor.
        """
        return cls._from_pool(
            pool,
            driver="psycopg",
            schema=schema,
            clock=clock,
            call_timeout=call_timeout,
            otel_enabled=otel_enabled,
            tracer_provider=tracer_provider,
        )

    @classmethod
    def _from_pool(
        cls,
        pool: Any,
        *,
        driver: Driver,
        schema: str,
        clock: Clock | None,
        call_timeout: float,
        otel_enabled: bool,
        tracer_provider: TracerProvider | None,
    ) -> Self:
        validate_identifier(schema, what="schema")
        if not (isinstance(call_timeout, int | float) and 0 < call_timeout < float("inf")):
            raise ValueError(
                f"call_timeout must be a finite number of seconds > 0, got {call_timeout!r}"
            )
        store = _composition().store_from_pool(
            pool, driver=driver, schema=schema, call_timeout=float(call_timeout)
        )
        # The client owns the store it built, not the pool: the store's close leaves it open.
        return cls(
            store,
            owns_store=True,
            clock=clock,
            otel_enabled=otel_enabled,
            tracer_provider=tracer_provider,
        )

    # -- lifecycle --------------------------------------------------------------------

    @property
    def store(self) -> ClientStore:
        return self._store

    async def aclose(self) -> None:
        """Close the store if this client owns it; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_store:
            await self._store.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- enqueue ----------------------------------------------------------------------

    async def enqueue(
        self,
        ref: ActorRef[P, R],
        payload: P | Mapping[str, Any],
        *,
        connection: Any = None,
        **options: Unpack[EnqueueArgs],
    ) -> JobHandle[R]:
        """Enqueue one job of ``ref``; returns its handle.

        ``options`` are the enqueue options (``EnqueueOptions``, shared with
        ``enqueue_many`` and ``ActorRef.new_job``): ``scheduled_at`` in the
        future schedules the job; ``identity_key`` / ``idempotency_key`` may
        return an existing job (``was_existing``); ``timeout`` bounds each attempt
        of this job, instead of the actor's ``timeout`` (stored with the job).
        ``connection`` writes inside the caller's transaction. The write runs in
        a PRODUCER span (``enqueue {queue}``) whose context the job stores as
        ``trace_id``/``span_id``, unless the call passes ids of its own (stored
        as given). Raises ``PayloadValidationError`` (nothing written),
        ``MaxPendingExceeded`` and the other ``EnqueueRefused`` errors,
        ``StoreUnavailable``.
        """
        _check_ref(ref)
        job = ref.new_job(payload, now=self._clock.now(), **options)
        enqueuer = self._enqueuer(connection)  # a wrong connection= is no unstorable job
        try:
            result = await enqueuer.enqueue(job)
        except ValueError as exc:  # a value no store can keep: say which, and where
            places = (("payload", job.payload), ("metadata", job.metadata))
            raise unstorable_error(ref.name, "job", places, exc) from exc
        return self._handle(ref, result)

    async def enqueue_many(
        self,
        ref: ActorRef[P, R],
        payloads: Sequence[P | Mapping[str, Any]],
        *,
        connection: Any = None,
        **options: Unpack[EnqueueArgs],
    ) -> list[JobHandle[R]]:
        """Enqueue one job per payload in one round trip, all or nothing.

        Every payload is validated first (the error names its index), the
        options (as for ``enqueue``) apply to every job, and handles come back
        in input order. One PRODUCER span covers the batch
        (``messaging.batch.message_count``); every job stores its context (or
        the ids the call passes).
        """
        _check_ref(ref)
        if isinstance(payloads, Mapping | BaseModel | str):
            raise TypeError("enqueue_many takes a sequence of payloads; use enqueue for one")
        # Any iterable works as before (a generator, a range of models...), indexed once.
        batch = payloads if isinstance(payloads, list | tuple) else list(payloads)
        if not batch:
            EnqueueOptions(**options)  # checked all the same, so a bad call fails every time
            return []
        try:
            # The first job checks the options (after its payload, as enqueue does);
            # every job shares them, so the others only need their payload dumped.
            first = ref.new_job(batch[0], now=self._clock.now(), **options)
        except PayloadValidationError as exc:
            raise PayloadValidationError(f"payload #0: {exc}") from exc
        # Every job shares first's options: stores may read them once.
        jobs = UniformJobs(first, ref.dump_payloads(batch))
        enqueuer = self._enqueuer(connection)
        try:
            results = await enqueuer.enqueue_many(jobs)
        except ValueError as exc:  # a value no store can keep: say which, and where
            places = itertools.chain(
                ((f"payload #{i}", p) for i, p in enumerate(jobs.payloads)),
                (("metadata", jobs.template.metadata),),
            )
            raise unstorable_error(ref.name, "batch", places, exc) from exc
        return JobHandle.for_results(results, store=self._store, ref=ref, clock=self._clock)

    def _enqueuer(self, connection: Any) -> JobEnqueuer:
        """Where an enqueue writes: the store, or ``connection`` through it; traced (the
        PRODUCER span, the job's creation context) unless ``otel_enabled`` is off."""
        enqueuer: JobEnqueuer
        if connection is None:
            enqueuer = self._store
        else:
            bind = getattr(self._store, "bound_to", None)
            if not callable(bind):
                raise ConfigurationError(
                    f"{type(self._store).__name__} cannot enqueue inside a caller's "
                    "transaction (it has no bound_to); use a Postgres-backed client for "
                    "connection="
                )
            enqueuer = cast(TransactionBinding, self._store).bound_to(connection)
        tracing = self._tracing
        return enqueuer if tracing is None else tracing.traced(enqueuer)

    def _handle(self, ref: ActorRef[Any, R], result: EnqueueResult) -> JobHandle[R]:
        return JobHandle(
            store=self._store,
            ref=ref,
            job_id=result.job_id,
            was_existing=result.was_existing,
            clock=self._clock,
        )

    # -- reads and cancel -------------------------------------------------------------

    def handle(self, ref: ActorRef[Any, R], job_id: int) -> JobHandle[R]:
        """A handle for a job enqueued earlier (for example, its id kept in a database)."""
        _check_ref(ref)
        job_id_can_exist(job_id)  # TypeError now, not at the first wait
        return JobHandle(store=self._store, ref=ref, job_id=job_id, clock=self._clock)

    async def get(self, job_id: int) -> Job | None:
        """The stored job, or ``None``."""
        return await self._store.get(job_id)

    async def attempts(self, job_id: int) -> list[AttemptRecord]:
        """The job's attempt history, oldest first; ``[]`` for no such job (or one pruned
        to the archive).

        One record per ended attempt: ``outcome`` (``succeeded``, ``failed``,
        ``retried``, ``snoozed``, ``cancelled``, ``lease_expired``, ...),
        ``error_class``, ``error`` (its message), ``traceback`` (the error's,
        at most 16,384 characters, innermost frames kept, no local variables),
        ``worker_id``, ``started_at`` and ``finished_at``. ``ConfigurationError``
        when the client's store has no ``attempts`` (a custom store need not).
        """
        read = getattr(self._store, "attempts", None)
        if not callable(read):
            raise ConfigurationError(
                f"{type(self._store).__name__} has no attempts(): it keeps no attempt history"
            )
        history: list[AttemptRecord] = await read(job_id)
        return history

    async def cancel(self, job_id: int) -> JobStatus:
        """Request a cancel (see ``JobHandle.cancel``); ``JobNotFound`` if there is no such job."""
        return await self._store.request_cancel(job_id)


__all__ = ["ClientStore", "CompositionRoot", "JobsClient", "TransactionBinding"]
