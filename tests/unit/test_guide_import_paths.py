"""The spec's worker guide and connections reference import from thin public modules.

The lines are copied verbatim from the guide and the reference; each must import, and
give the object the app layer implements (the modules only re-export).
"""

from __future__ import annotations

import importlib

import pytest

import taskq.app.connections
from taskq.app.settings import TaskQSettings as AppTaskQSettings
from taskq.app.settings import WorkerSettings as AppWorkerSettings
from taskq.app.worker import worker_main as app_worker_main

#: Verbatim from the worker guide ("Programmatically via worker_main()") and the
#: connections reference's example.
GUIDE_LINES = {
    "from taskq.settings import WorkerSettings": ("WorkerSettings", AppWorkerSettings),
    "from taskq.worker.run import worker_main": ("worker_main", app_worker_main),
    "from taskq.connections import WorkerConnections": (
        "WorkerConnections",
        taskq.app.connections.WorkerConnections,
    ),
}

#: ``taskq.connections.__all__`` as the connections reference lists it.
CONNECTIONS_ALL = [
    "DEFAULT_MAX_CACHED_STATEMENT_LIFETIME",
    "DEFAULT_STATEMENT_CACHE_SIZE",
    "ConnFactory",
    "PoolFactory",
    "RedisFactory",
    "WorkerConnections",
    "bounded_lock_budget_ms",
    "connection_init_hook",
    "lock_budget_command_timeout_secs",
    "lock_budget_pairs",
    "statement_cache_kwargs",
    "with_connection_init",
]


@pytest.mark.parametrize("line", list(GUIDE_LINES))
def test_the_guide_import_line_works(line: str) -> None:
    name, implementation = GUIDE_LINES[line]
    namespace: dict[str, object] = {}
    exec(line, namespace)
    assert namespace[name] is implementation


def test_taskq_connections_exports_the_references_names() -> None:
    module = importlib.import_module("taskq.connections")
    assert module.__all__ == CONNECTIONS_ALL
    for name in CONNECTIONS_ALL:
        assert getattr(module, name) is getattr(taskq.app.connections, name), name


def test_taskq_settings_names_the_settings_the_reference_types_with() -> None:
    """The reference types ``statement_cache_kwargs`` with ``taskq.settings.TaskQSettings``."""
    from taskq.settings import TaskQSettings

    assert TaskQSettings is AppTaskQSettings


def test_the_worker_package_names_what_the_guides_import() -> None:
    worker = importlib.import_module("taskq.worker")
    app_worker = importlib.import_module("taskq.app.worker")
    for name in ("ExitCode", "Worker", "WorkerPorts", "run_worker", "worker_main"):
        assert getattr(worker, name) is getattr(app_worker, name), name


def test_the_guides_import_only_public_paths() -> None:
    """The app layer's modules move between releases; what the guides teach must not."""
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    offenders = [
        f"{path.relative_to(docs)}:{number}"
        for path in sorted([*docs.rglob("*.md"), *docs.rglob("*.py")])
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "from taskq.app" in line or "import taskq.app" in line
    ]
    assert offenders == []
