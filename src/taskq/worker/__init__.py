"""The worker's public names: ``taskq.worker`` and ``taskq.worker.run`` (the worker guide's path).

Thin re-exports only: the runtime lives in :mod:`taskq.app.worker`, so application code and
the guides never import from the app layer's internals.
"""

from taskq.app.worker import ExitCode, Worker, WorkerPorts, run_worker, worker_main

__all__ = ["ExitCode", "Worker", "WorkerPorts", "run_worker", "worker_main"]
