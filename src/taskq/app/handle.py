"""JobHandle: an enqueued job, seen from the application that enqueued it.

A client has no LISTEN connection, so :meth:`JobHandle.wait` polls the store:
first after ~5 ms (short jobs finish fast), then doubling up to
``poll_interval``. All waiting goes through a ``Clock``, so tests drive it
with a fake clock instead of sleeping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

from taskq.domain.errors import JobFailed, JobNotFound, StoreClosed, StoreUnavailable
from taskq.domain.job import EnqueueResult, Job
from taskq.domain.status import JobStatus
from taskq.ports.clock import Clock
from taskq.ports.queue_store import JobCanceller, JobReader

if TYPE_CHECKING:
    from taskq.app.actors.ref import ActorRef

R = TypeVar("R")

#: The first poll of ``wait`` comes this soon: most jobs are short.
FIRST_POLL_DELAY: Final = 0.005
#: The default ceiling of the poll backoff.
DEFAULT_POLL_INTERVAL: Final = 0.5
#: The least time a poll of a timed ``wait`` is given, so ``timeout=0`` still reads once.
MIN_POLL_BOUND: Final = 0.05

#: Polls given up at a wait's timeout, still finishing their cancellation: referenced
#: so they are not collected mid-flight.
_abandoned: set[asyncio.Future[Any]] = set()


class HandleStore(JobReader, JobCanceller, Protocol):
    """What a handle needs from the store: reads and cancel requests."""


class WallClock:
    """Real time, for clients not given a clock (``app`` may not import adapters)."""

    def __repr__(self) -> str:
        return "WallClock()"

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class JobHandle(Generic[R]):
    """One enqueued job: its id, status, cancel, and its typed result.

    ``was_existing`` is true when the enqueue matched a stored job through an
    identity or idempotency key (this handle then points at that job).
    """

    __slots__ = ("_clock", "_store", "actor", "job_id", "was_existing")

    def __init__(
        self,
        *,
        store: HandleStore,
        ref: ActorRef[Any, R],
        job_id: int,
        was_existing: bool = False,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._clock: Clock = clock if clock is not None else WallClock()
        self.actor = ref
        self.job_id = job_id
        self.was_existing = was_existing

    @classmethod
    def for_results(
        cls,
        results: Iterable[EnqueueResult],
        *,
        store: HandleStore,
        ref: ActorRef[Any, R],
        clock: Clock,
    ) -> list[JobHandle[R]]:
        """One handle per enqueue result, in order: what ``__init__`` builds, without a
        keyword call per job (an ``enqueue_many`` of 10,000 jobs builds 10,000)."""
        new = object.__new__
        handles: list[JobHandle[R]] = []
        append = handles.append
        for result in results:
            handle = new(cls)
            handle._store = store
            handle._clock = clock
            handle.actor = ref
            handle.job_id = result.job_id
            handle.was_existing = result.was_existing
            append(handle)
        return handles

    def __repr__(self) -> str:
        existing = " existing" if self.was_existing else ""
        return f"<JobHandle {self.actor.name!r} job_id={self.job_id}{existing}>"

    async def get(self) -> Job:
        """The stored job; ``JobNotFound`` if it no longer exists (pruned)."""
        job = await self._store.get(self.job_id)
        if job is None:
            raise JobNotFound(self.job_id)
        return job

    async def status(self) -> JobStatus:
        """The job's current status; ``JobNotFound`` if it no longer exists."""
        return (await self.get()).status

    async def cancel(self) -> JobStatus:
        """Ask for the job to be cancelled; returns its status right after the request.

        A waiting job is cancelled at once; a running one is asked to stop
        cooperatively (its worker sees the request on its next heartbeat).
        """
        return await self._store.request_cancel(self.job_id)

    # The timeout is measured on the injected clock (fake in tests), which
    # asyncio.timeout cannot do; the interface also names it ``timeout``.
    async def wait(
        self,
        timeout: float | None = None,  # noqa: ASYNC109
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> R:
        """Wait until the job finishes and return its typed result.

        Raises :class:`JobFailed` when it ended failed, cancelled, abandoned
        or crashed; :class:`TimeoutError` when ``timeout`` seconds pass first
        (the job itself is left alone); :class:`JobNotFound` when it no longer
        exists. ``poll_interval`` caps the poll backoff. A poll the database
        fails (``StoreUnavailable``: a restart, a dropped connection) is tried
        again on the same schedule: it is raised only when ``timeout`` passes
        with the database still failing. A poll the store does not answer (a
        network that stopped answering) is given up when ``timeout`` passes
        (:class:`TimeoutError` saying so; at least 50 ms for a poll). A closed
        client or pool (:class:`StoreClosed`) is raised at once.
        """
        if not poll_interval > 0:
            raise ValueError(f"poll_interval must be > 0, got {poll_interval}")
        if timeout is not None and not timeout >= 0:
            raise ValueError(f"timeout must be >= 0 or None, got {timeout}")
        deadline = None if timeout is None else self._clock.monotonic() + timeout
        delay = min(FIRST_POLL_DELAY, poll_interval)
        while True:
            try:
                job: Job | StoreUnavailable = await self._poll(deadline, timeout)
            except StoreClosed:
                raise  # closed, not an outage: no poll can succeed
            except StoreUnavailable as exc:
                job = exc
            if isinstance(job, Job) and job.status.is_terminal:
                return self._outcome(job)
            pause = delay
            if deadline is not None:
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0:
                    if isinstance(job, StoreUnavailable):
                        raise job
                    raise TimeoutError(
                        f"job {self.job_id} is still {job.status.value} after {timeout} s"
                    )
                pause = min(pause, remaining)
            await self._clock.sleep(pause)
            delay = min(delay * 2, poll_interval)

    async def _poll(self, deadline: float | None, waited: float | None) -> Job:
        """One read, given up when the wait's deadline passes first.

        A store call may hang (a network that stopped answering, a pool with no free
        connection, a custom store without a bound of its own), and the caller's
        ``timeout`` must hold all the same. The bound is real time (a store call does
        not run on the injected clock). The read is then cancelled but not waited for:
        on a dead connection the cancellation can hang as long as the read.
        """
        if deadline is None:
            return await self.get()
        bound = max(deadline - self._clock.monotonic(), MIN_POLL_BOUND)
        read = asyncio.ensure_future(self.get())
        try:
            done, _ = await asyncio.wait({read}, timeout=bound)
        except BaseException:
            _abandon(read)
            raise
        if not done:
            _abandon(read)
            raise TimeoutError(
                f"job {self.job_id}: the store did not answer within the wait's timeout "
                f"({waited} s)"
            )
        return read.result()

    def _outcome(self, job: Job) -> R:
        if job.status is not JobStatus.SUCCEEDED:
            raise JobFailed(job.id, job.status.value, job.last_error)
        try:
            return self.actor.load_result(job.result)
        except ValueError as exc:
            if job.result is None and job.result_expires_at is not None:
                raise ValueError(
                    f"job {job.id} succeeded but its result expired at "
                    f"{job.result_expires_at.isoformat()} (result_ttl)"
                ) from exc
            raise


def _abandon(read: asyncio.Future[Any]) -> None:
    read.cancel()
    _abandoned.add(read)

    def forget(done: asyncio.Future[Any]) -> None:
        _abandoned.discard(done)
        if not done.cancelled():
            done.exception()  # retrieved: the wait already reported its timeout

    read.add_done_callback(forget)


__all__ = [
    "DEFAULT_POLL_INTERVAL",
    "FIRST_POLL_DELAY",
    "MIN_POLL_BOUND",
    "HandleStore",
    "JobHandle",
    "WallClock",
]
