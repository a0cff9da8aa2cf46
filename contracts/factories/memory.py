"""Contract-suite factory for the in-memory adapter (it lives in :mod:`taskq.testing.memory`).

Kept here so the suite names every built-in arm as ``factories.<adapter>``.
"""

from taskq.testing.memory import memory_harness

__all__ = ["memory_harness"]
