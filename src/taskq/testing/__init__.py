"""What tests import from TaskQ: the contract suite's harness and its pytest plugin.

An adapter author writes a factory yielding a :class:`Harness` and runs
``pytest --taskq-adapter=module:factory``: the plugin (:mod:`taskq.testing.plugin`,
registered as a pytest entry point) collects the suite shipped in
``taskq.testing.contracts``. See ``docs/contract-suite.md``.

Names are imported on first use, so pytest loading the plugin in a project that
never runs the suite does not import TaskQ's ports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typed for checkers, imported lazily at run time
    from taskq.adapters.memory import FakeClock
    from taskq.testing.harness import EPOCH, Harness, HarnessFactory
    from taskq.testing.memory import memory_harness

_LAZY: dict[str, str] = {
    "EPOCH": "taskq.testing.harness",
    "FakeClock": "taskq.adapters.memory",
    "Harness": "taskq.testing.harness",
    "HarnessFactory": "taskq.testing.harness",
    "memory_harness": "taskq.testing.memory",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'taskq.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["EPOCH", "FakeClock", "Harness", "HarnessFactory", "memory_harness"]
