"""The in-memory adapter: every port, honest enough for whole-worker tests.

``MemoryBackend(clock=FakeClock())`` is one "database"; make as many stores,
leader locks, notifiers and rate limiters on it as the test has processes.
Leases expire on the clock, claims are exclusive, owner writes are fenced.
"""

from taskq.adapters.memory.backend import MemoryBackend
from taskq.adapters.memory.clock import DEFAULT_START, FakeClock
from taskq.adapters.memory.leader_lock import MemoryLeaderLock
from taskq.adapters.memory.notifier import MemoryNotifier
from taskq.adapters.memory.rate_limiter import MemoryRateLimiter
from taskq.adapters.memory.store import MEMORY_CAPABILITIES, MemoryQueueStore

__all__ = [
    "DEFAULT_START",
    "MEMORY_CAPABILITIES",
    "FakeClock",
    "MemoryBackend",
    "MemoryLeaderLock",
    "MemoryNotifier",
    "MemoryQueueStore",
    "MemoryRateLimiter",
]
