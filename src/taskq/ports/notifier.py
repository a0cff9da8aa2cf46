"""Notifier port: wake-ups that cut dispatch latency below the poll interval."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

#: Called with the queue name a wake-up was published for ("" = any queue).
WakeCallback = Callable[[str], None]


class Notifier(Protocol):
    """Publish and receive wake-ups for one schema.

    Contract:
    - After ``start()``, every ``publish(queue)`` by any notifier of the same
      schema reaches every callback registered with ``subscribe`` on every
      started notifier of that schema (fan-out), usually within milliseconds.
      Wake-ups are hints, not messages: they may be coalesced or, across a
      reconnect, lost; the app always keeps a slow poll as a backstop.
    - ``subscribe`` returns an unsubscribe function; callbacks run on the
      event loop and must not block.
    - When the notifier sees its listening session end, it tries to
      reconnect by itself at once, without waiting for a ``health_check``
      (which goes on trying, with backoff, should that fail).
    - ``health_check()`` verifies the subscription's connection (a session can
      die unseen); when it is gone the notifier reconnects with bounded
      exponential backoff and subscribes again, then returns True. It returns
      False while it cannot reconnect. ``connected`` says whether it is
      listening now.
    - After every reconnect, each subscriber gets one wake-up for any queue
      (``""``): wake-ups published while nobody listened are lost.
    - ``close()`` stops listening and frees resources; idempotent.
    """

    @property
    def connected(self) -> bool: ...

    async def start(self) -> None: ...

    async def publish(self, queue: str = "") -> None: ...

    def subscribe(self, callback: WakeCallback) -> Callable[[], None]: ...

    async def health_check(self) -> bool: ...

    async def close(self) -> None: ...
