"""A harness factory for an adapter that implements only the RateLimiter port.

Its other ports are the memory adapter's, as a Harness needs them, but opening a
leader lock, a notifier or another store fails the test that tries: a run that
selects only ``rate_limiter`` must never reach them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NoReturn

from taskq.testing import Harness, memory_harness


async def _not_implemented() -> NoReturn:
    raise AssertionError("this adapter implements only the rate limiter")


@asynccontextmanager
async def limiter_only_harness() -> AsyncIterator[Harness]:
    async with memory_harness() as base:
        base.name = "limiter-only"
        base.open_store = _not_implemented
        base.open_leader_lock = _not_implemented
        base.open_notifier = _not_implemented
        yield base


@asynccontextmanager
async def no_limiter_harness() -> AsyncIterator[Harness]:
    """Every port but the rate limiter (``open_rate_limiter`` is None)."""
    async with memory_harness() as base:
        base.name = "no-limiter"
        base.open_rate_limiter = None
        yield base
