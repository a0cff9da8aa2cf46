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

import logging
import os
import threading
from collections.abc import Callable
from typing import Final

from taskq.app.worker import events

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

    def arm(self, exit_code: int) -> None:
        """Start counting down to ending the process with ``exit_code``."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._wait, args=(exit_code,), name="taskq-exit-guard", daemon=True
        )
        self._thread.start()

    def disarm(self) -> None:
        self._disarmed.set()

    def _wait(self, exit_code: int) -> None:
        if self._disarmed.wait(self.within):
            return
        events.emit(
            events.WORKER_EXIT_FORCED,
            logging.WARNING,
            exit_code=exit_code,
            seconds=self.within,
            threads=sorted(t.name for t in holding_threads()),
        )
        events.flush_logs()
        self._hard_exit(exit_code)


def holding_threads() -> list[threading.Thread]:
    """Threads that would keep the interpreter from exiting: alive, not daemons, not
    this one (the main thread)."""
    current = threading.current_thread()
    return [t for t in threading.enumerate() if t.is_alive() and not t.daemon and t is not current]


__all__ = ["EXIT_GRACE", "ExitGuard", "holding_threads"]
