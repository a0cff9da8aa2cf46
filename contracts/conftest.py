"""Loads the contract-suite plugin (adapter option, ``harness`` fixture, marker).

Kept as ``pytest_plugins`` so ``-p contracts.plugin`` on the command line and
this conftest never register it twice.
"""

from __future__ import annotations

pytest_plugins = ("contracts.plugin",)
