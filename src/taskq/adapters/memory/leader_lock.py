"""MemoryLeaderLock: the maintenance-leader lock on a memory backend.

The backend's ``leader.holder`` plays the part of the server-side advisory
lock; ``held`` is what this instance believes. They differ after
:meth:`MemoryLeaderLock.sever` (or the backend becoming unreachable), exactly
as a Postgres session lock vanishes with its connection while the client
only learns it on its next probe.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from taskq.domain.errors import StoreUnavailable

if TYPE_CHECKING:
    from taskq.adapters.memory.backend import MemoryBackend
    from taskq.ports.leader_lock import LeaderLock


class MemoryLeaderLock:
    """One holder per backend (schema); see the ``LeaderLock`` port."""

    def __init__(self, backend: MemoryBackend) -> None:
        self._db = backend
        self._held = False
        self._closed = False

    def __repr__(self) -> str:
        return f"<MemoryLeaderLock held={self._held} closed={self._closed}>"

    @property
    def held(self) -> bool:
        return self._held

    async def try_acquire(self) -> bool:
        await asyncio.sleep(0)
        if self._closed:
            raise StoreUnavailable("leader lock is closed")
        self._db.check_reachable()
        # A severed session reconnects here: acquiring always uses a live one.
        if self._db.leader.holder is None:
            self._db.leader.holder = self
        self._held = self._db.leader.holder is self
        return self._held

    async def probe(self) -> bool:
        await asyncio.sleep(0)
        if self._held and self._db.leader.holder is not self:
            self._held = False
        return self._held

    async def release(self) -> None:
        await asyncio.sleep(0)
        self._drop()

    async def close(self) -> None:
        self._drop()
        self._closed = True

    def sever(self) -> None:
        """Kill this instance's session: the lock is gone server-side, ``held`` unchanged."""
        if self._db.leader.holder is self:
            self._db.leader.holder = None

    def _drop(self) -> None:
        if self._db.leader.holder is self:
            self._db.leader.holder = None
        self._held = False


if TYPE_CHECKING:

    def _conforms(backend: MemoryBackend) -> LeaderLock:
        return MemoryLeaderLock(backend)


__all__ = ["MemoryLeaderLock"]
