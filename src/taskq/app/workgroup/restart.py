"""When a crashed child is started again: a burst limiter, pure logic on given times.

A child that crashes at once (an actors module that fails to import, a database it may
not use) would otherwise be restarted forever, flooding logs and the database with
connection attempts. So at most ``max_restarts`` restarts happen within any ``window``
seconds; the next crash inside the window gives the child up.
"""

from __future__ import annotations

from collections import deque

from taskq.app.workgroup.config import RestartSpec


class BurstLimiter:
    """Restart times of one child within the sliding window, on a monotonic clock."""

    def __init__(self, spec: RestartSpec) -> None:
        self._spec = spec
        self._restarts: deque[float] = deque()

    def allow(self, now: float) -> bool:
        """Whether a crash at ``now`` may restart the child; records the restart if so."""
        while self._restarts and now - self._restarts[0] >= self._spec.window:
            self._restarts.popleft()
        if len(self._restarts) >= self._spec.max_restarts:
            return False
        self._restarts.append(now)
        return True

    @property
    def recent(self) -> int:
        """Restarts counted in the current window (for log lines)."""
        return len(self._restarts)
