"""The in-memory adapter as a contract-suite harness: the suite's own memory arm, and the
ports an adapter for only some of them fills the rest from (docs/contract-suite.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from taskq.adapters.memory import (
    MEMORY_CAPABILITIES,
    FakeClock,
    MemoryBackend,
    MemoryLeaderLock,
    MemoryNotifier,
    MemoryQueueStore,
)
from taskq.ports.leader_lock import LeaderLock
from taskq.ports.notifier import Notifier
from taskq.ports.queue_store import QueueStore
from taskq.ports.rate_limiter import RateLimiter
from taskq.testing.harness import EPOCH, Harness

if TYPE_CHECKING:
    from taskq.testing.harness import HarnessFactory


@asynccontextmanager
async def memory_harness() -> AsyncIterator[Harness]:
    """A fresh backend on a fake clock at ``EPOCH``; every opened port closes on exit."""
    backend = MemoryBackend(clock=FakeClock(EPOCH))
    async with AsyncExitStack() as stack:

        def owned_store() -> MemoryQueueStore:
            store = backend.store()
            stack.push_async_callback(store.close)
            return store

        async def open_store() -> QueueStore:
            return owned_store()

        async def open_leader_lock() -> LeaderLock:
            lock = backend.leader_lock()
            stack.push_async_callback(lock.close)
            return lock

        async def open_notifier() -> Notifier:
            notifier = backend.notifier()
            stack.push_async_callback(notifier.close)
            return notifier

        async def open_rate_limiter() -> RateLimiter:
            limiter = backend.rate_limiter()
            stack.push_async_callback(limiter.close)
            return limiter

        async def sever(instance: object) -> None:
            if not isinstance(instance, MemoryLeaderLock | MemoryNotifier):
                raise TypeError(f"memory harness cannot sever {instance!r}")
            instance.sever()

        yield Harness(
            name="memory",
            store=owned_store(),
            open_store=open_store,
            open_leader_lock=open_leader_lock,
            open_notifier=open_notifier,
            sever=sever,
            clock=backend.clock,
            open_rate_limiter=open_rate_limiter,
            capabilities=MEMORY_CAPABILITIES,
        )


if TYPE_CHECKING:
    _factory: HarnessFactory = memory_harness

__all__ = ["memory_harness"]
