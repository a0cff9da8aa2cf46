"""Harness factories for the adapters shipped with TaskQ, one module per adapter.

Each module exposes an ``@asynccontextmanager`` function taking no arguments
and yielding a :class:`contracts.harness.Harness` (e.g.
``contracts.factories.memory:memory_harness``). Modules are imported on
demand, so a missing driver only disables its own adapter.
"""
