"""One lock per caller connection, so enqueues given the same ``connection=`` take turns.

Each bound enqueue runs in a savepoint of the caller's transaction. Two of them
interleaved on one connection (``asyncio.gather``) released each other's savepoints
and aborted the caller's transaction (psycopg), or met asyncpg's "another operation
is in progress". Taking turns makes them all work, whatever store or client issued them.
"""

from __future__ import annotations

import asyncio
from typing import Final
from weakref import WeakKeyDictionary

_LOCKS: Final[WeakKeyDictionary[object, asyncio.Lock]] = WeakKeyDictionary()


def connection_lock(connection: object) -> asyncio.Lock:
    """The lock of ``connection`` (the driver's own connection object, not a proxy of it)."""
    lock = _LOCKS.get(connection)
    if lock is None:
        lock = _LOCKS[connection] = asyncio.Lock()
    return lock


__all__ = ["connection_lock"]
