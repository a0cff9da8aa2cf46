"""Clock port: the only way app code learns the time or waits."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class Clock(Protocol):
    """Wall time, monotonic time and sleeping.

    Contract: ``now()`` is timezone-aware UTC and never goes backwards between
    calls on one clock; ``monotonic()`` is seconds on an arbitrary origin;
    ``sleep(s)`` returns once ``monotonic()`` has advanced by at least ``s``
    (a fake clock returns when ``advance()`` moves it that far, without real
    waiting). ``sleep`` is cancellable.
    """

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...
