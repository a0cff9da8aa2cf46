"""Settings at the import path the worker guide uses (``from taskq.settings import ...``).

A thin public name only: the models live in :mod:`taskq.app.settings`.
"""

from __future__ import annotations

from taskq.app.settings import TaskQSettings, WorkerSettings

__all__ = ["TaskQSettings", "WorkerSettings"]
