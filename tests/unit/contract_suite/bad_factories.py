"""Harness factories of the wrong shape, as adapter authors write them by mistake."""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from taskq.adapters.memory import FakeClock, MemoryBackend


async def plain_async() -> None:
    """An async def returning a harness, not a context manager."""


@contextmanager
def sync_cm() -> Iterator[None]:
    yield None


@asynccontextmanager
async def needs_arg(dsn: str) -> AsyncIterator[None]:
    yield None


async def _gen() -> AsyncIterator[None]:
    yield None


async_gen = _gen  # an async generator function without @asynccontextmanager


def returns_coroutine() -> Coroutine[Any, Any, None]:
    """Looks right from outside (a plain def), but what it returns is a coroutine."""
    return plain_async()


@asynccontextmanager
async def yields_dict() -> AsyncIterator[dict[str, object]]:
    yield {"store": None}


@asynccontextmanager
async def yields_store() -> AsyncIterator[object]:
    yield MemoryBackend(clock=FakeClock()).store()
