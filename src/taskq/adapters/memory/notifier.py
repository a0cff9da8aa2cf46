"""MemoryNotifier: wake-ups between the stores, workers and clients of one backend.

A started notifier is a listening session attached to the backend's hub.
:meth:`MemoryNotifier.sever` kills that session the way the server ends one
(the driver sees it): the notifier reconnects on the next turn of the event
loop while the backend is reachable, else at the next successful
:meth:`~MemoryNotifier.health_check`. Wake-ups published meanwhile are lost,
as with LISTEN across a reconnect, and after each reconnect every subscriber
gets one wake-up for any queue (""). Callbacks are scheduled on the event
loop, never called inside ``publish``, the way a real notification arrives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from taskq.domain.errors import StoreUnavailable
from taskq.ports.notifier import WakeCallback

if TYPE_CHECKING:
    from taskq.adapters.memory.backend import MemoryBackend
    from taskq.ports.notifier import Notifier


class MemoryNotifier:
    """See the ``Notifier`` port. Reconnecting is immediate while the backend is reachable."""

    def __init__(self, backend: MemoryBackend) -> None:
        self._db = backend
        self._callbacks: list[WakeCallback] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._closed = False
        self.reconnects = 0

    def __repr__(self) -> str:
        return (
            f"<MemoryNotifier started={self._started} connected={self.connected} "
            f"closed={self._closed}>"
        )

    @property
    def connected(self) -> bool:
        return self._started and not self._closed and self._db.hub.is_attached(self)

    async def start(self) -> None:
        await asyncio.sleep(0)
        if self._closed:
            raise StoreUnavailable("notifier is closed")
        self._db.check_reachable()
        self._loop = asyncio.get_running_loop()
        self._started = True
        self._db.hub.attach(self)

    async def publish(self, queue: str = "") -> None:
        # Publishing uses its own short-lived connection, not the listening one,
        # so it works whether or not this notifier is started or severed.
        await asyncio.sleep(0)
        if self._closed:
            raise StoreUnavailable("notifier is closed")
        self._db.check_reachable()
        self._db.hub.publish(queue)

    def subscribe(self, callback: WakeCallback) -> Callable[[], None]:
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            # Idempotent; removes this registration only (the same callback may
            # be subscribed twice).
            for i, existing in enumerate(self._callbacks):
                if existing is callback:
                    del self._callbacks[i]
                    return

        return unsubscribe

    async def health_check(self) -> bool:
        await asyncio.sleep(0)
        if self._closed or not self._started:
            return False
        if self.connected:
            return True
        return self._reconnect()

    async def close(self) -> None:
        self._closed = True
        self._db.hub.detach(self)
        self._callbacks.clear()

    def sever(self) -> None:
        """Kill the listening session; it comes back on the next loop turn if it can."""
        self._db.hub.detach(self)
        if self._started and not self._closed and self._loop is not None:
            self._loop.call_soon(self._reconnect)

    def _reconnect(self) -> bool:
        """Listen again unless the backend is unreachable; then one "" wake-up for all."""
        if self._closed or not self._started:
            return False
        if self.connected:
            return True
        if not self._db.reachable:
            return False
        self._db.hub.attach(self)
        self.reconnects += 1
        self.deliver("")  # wake-ups published while nobody listened are lost
        return True

    def deliver(self, queue: str) -> None:
        """Called by the hub for each wake-up while this notifier is attached."""
        if self._loop is None or self._loop.is_closed():
            return
        for callback in list(self._callbacks):
            self._loop.call_soon(self._run, callback, queue)

    def _run(self, callback: WakeCallback, queue: str) -> None:
        # Checked again at delivery: a session severed or a callback removed
        # after the publish must not see the wake-up.
        if self.connected and any(c is callback for c in self._callbacks):
            callback(queue)


if TYPE_CHECKING:

    def _conforms(backend: MemoryBackend) -> Notifier:
        return MemoryNotifier(backend)


__all__ = ["MemoryNotifier"]
