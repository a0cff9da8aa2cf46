"""Ending a worker process that job code it gave up on would keep alive.

When ``worker_main`` returns, the worker's shutdown is complete: every job has
its outcome written, including those it gave up on. Code of such a job may still
hold the process, though: an ``async def`` actor that swallows cancellation keeps
its task pending, so the event loop's close waits for it, and a thread that never
returns (a ``to_thread`` call of an async actor, a thread the actor started) is
joined at interpreter exit. Neither can be stopped from outside. The guard gives
the process ``within`` seconds to end on its own after the worker stopped, then
ends it with the worker's exit code, as the orchestrator's kill would later,
logging ``worker-exit-forced`` first.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Final

from taskq.app.worker import events

#: The name of a job's task is this and its id (``consumer``).
JOB_TASK_PREFIX: Final = "taskq-job-"
#: Seconds the process has, after the worker stopped, to end on its own.
EXIT_GRACE: Final = 5.0


class ExitGuard:
    """A daemon thread that ends the process ``within`` seconds after :meth:`arm`,
    unless :meth:`disarm` runs first."""

    def __init__(
        self,
        *,
        within: float = EXIT_GRACE,
        hard_exit: Callable[[int], None] = os._exit,
    ) -> None:
        self.within = within
        self._hard_exit = hard_exit
        self._disarmed = threading.Event()
        self._thread: threading.Thread | None = None

    def arm(self, exit_code: int, jobs: Sequence[int] = ()) -> None:
        """Start counting down to ending the process with ``exit_code``; ``jobs`` are the
        ids of jobs whose code still runs (named in ``worker-exit-forced``)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._wait, args=(exit_code, list(jobs)), name="taskq-exit-guard", daemon=True
        )
        self._thread.start()

    def disarm(self) -> None:
        self._disarmed.set()

    def _wait(self, exit_code: int, jobs: list[int]) -> None:
        if self._disarmed.wait(self.within):
            return
        events.emit(
            events.WORKER_EXIT_FORCED,
            logging.WARNING,
            exit_code=exit_code,
            seconds=self.within,
            threads=sorted(t.name for t in holding_threads()),
            jobs=jobs,
            note="these jobs' code was still running; their outcomes were written when the "
            "worker gave up on them",
        )
        events.flush_logs()
        self._hard_exit(exit_code)


def running_job_ids(loop: asyncio.AbstractEventLoop) -> list[int]:
    """Ids of the jobs whose task is still pending on ``loop`` (tasks ``taskq-job-<id>``):
    code the worker gave up on, which would hold the loop's close."""
    ids = []
    for task in asyncio.all_tasks(loop):
        name = task.get_name()
        if name.startswith(JOB_TASK_PREFIX) and name[len(JOB_TASK_PREFIX) :].isdigit():
            ids.append(int(name[len(JOB_TASK_PREFIX) :]))
    return sorted(ids)


def holding_threads() -> list[threading.Thread]:
    """Threads that would keep the interpreter from exiting: alive, not daemons, not
    this one (the main thread)."""
    current = threading.current_thread()
    return [t for t in threading.enumerate() if t.is_alive() and not t.daemon and t is not current]


__all__ = ["EXIT_GRACE", "JOB_TASK_PREFIX", "ExitGuard", "holding_threads", "running_job_ids"]
