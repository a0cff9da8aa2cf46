"""The production ``Clock``: real wall time, real monotonic time, real sleeping."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING


class SystemClock:
    """``now()`` is ``datetime.now(UTC)``, ``monotonic()`` is ``time.monotonic()``.

    ``sleep`` is ``asyncio.sleep``, so it is cancellable like any await.
    """

    def __repr__(self) -> str:
        return "SystemClock()"

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


if TYPE_CHECKING:
    from taskq.ports.clock import Clock

    def _conforms() -> Clock:
        return SystemClock()


__all__ = ["SystemClock"]
