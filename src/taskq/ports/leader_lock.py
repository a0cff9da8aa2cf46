"""LeaderLock port: one maintenance leader per schema, cluster-wide."""

from __future__ import annotations

from typing import Protocol


class LeaderLock(Protocol):
    """A lock that at most one holder in the cluster holds at a time.

    Contract:
    - ``try_acquire()`` never waits for another holder: it returns True when
      this instance now holds the lock (also when it already did), False when
      someone else holds it.
    - At most one instance (per schema) is ``held`` at any moment.
    - ``probe()`` asks the backend whether this instance still holds it; when
      the holder's session died it returns False and ``held`` becomes False,
      so the app stops acting as leader. After the loss another instance can
      acquire it.
    - ``release()`` gives it up (idempotent); ``close()`` releases and frees
      resources. Keys are scoped by schema: two schemas have two leaders.
    """

    @property
    def held(self) -> bool: ...

    async def try_acquire(self) -> bool: ...

    async def probe(self) -> bool: ...

    async def release(self) -> None: ...

    async def close(self) -> None: ...
