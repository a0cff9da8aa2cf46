"""Gives the suite its hooks and ``harness`` fixture (from ``plugin.py``), for its tests only.

A conftest rather than a plugin, so they act wherever the suite is collected and
nowhere else; the options they read come from the ``taskq`` pytest entry point
(:mod:`taskq.testing.plugin`), which registers nothing here twice.
"""

from __future__ import annotations

from .plugin import (
    harness,
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_collectstart,
    pytest_configure,
    pytest_generate_tests,
    pytest_terminal_summary,
)

__all__ = [
    "harness",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_collectstart",
    "pytest_configure",
    "pytest_generate_tests",
    "pytest_terminal_summary",
]
