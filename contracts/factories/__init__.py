"""Harness factories for the adapters shipped with TaskQ, one module per adapter.

Each module exposes an ``@asynccontextmanager`` function taking no arguments
and yielding a :class:`taskq.testing.Harness`; installed, the memory one is
``taskq.testing.contracts.factories.memory:memory_harness``. Modules are
imported on demand, so a missing driver only disables its own adapter.
"""
