"""``worker_main`` at the import path the worker guide uses.

``sys.exit(worker_main(WorkerSettings.load(), actor_registry=registry))`` runs a
worker process; the implementation is :func:`taskq.app.worker.worker_main`.
"""

from __future__ import annotations

from taskq.app.worker import worker_main

__all__ = ["worker_main"]
