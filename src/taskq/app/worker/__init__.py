"""The worker runtime: one asyncio TaskGroup per process, on any ports.

``worker_main`` runs a worker process; ``run_worker`` runs one inside an
event loop that is already running (an application's own tests, with the
memory adapter and a fake clock); :class:`Worker` is the runtime itself, with
``request_shutdown()`` for a SIGTERM without a signal.
"""

from taskq.app.worker.exit_codes import ExitCode
from taskq.app.worker.main import run_worker, worker_main
from taskq.app.worker.ports import WorkerPorts
from taskq.app.worker.runtime import Worker

__all__ = ["ExitCode", "Worker", "WorkerPorts", "run_worker", "worker_main"]
