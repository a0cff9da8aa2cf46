"""The memory backend's wake-up channel (what ``NOTIFY`` is for Postgres)."""

from __future__ import annotations

from typing import Protocol


class WakeListener(Protocol):
    """A listening session: gets every wake-up published while it is attached."""

    def deliver(self, queue: str) -> None: ...


class NotifyHub:
    """Fans every published wake-up out to the attached (listening) notifiers.

    A notifier is attached while it is started and its simulated connection is
    up; wake-ups published while it is detached are lost, as with LISTEN.
    """

    def __init__(self) -> None:
        self._listeners: list[WakeListener] = []
        self.published = 0

    def attach(self, listener: WakeListener) -> None:
        if not any(existing is listener for existing in self._listeners):
            self._listeners.append(listener)

    def detach(self, listener: WakeListener) -> None:
        self._listeners = [existing for existing in self._listeners if existing is not listener]

    def disconnect_all(self) -> None:
        """Every listening session dies at once (the database went away)."""
        self._listeners = []

    def is_attached(self, listener: WakeListener) -> bool:
        return any(existing is listener for existing in self._listeners)

    def publish(self, queue: str = "") -> None:
        """Send one wake-up for ``queue`` ("" = any queue) to every attached listener."""
        self.published += 1
        for listener in list(self._listeners):
            listener.deliver(queue)
