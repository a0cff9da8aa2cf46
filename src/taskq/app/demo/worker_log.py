"""Where the demo's worker logs go (a file), and what the demo learns from them.

The worker's structured events would scroll the live display away, so they
go to a file the demo names. A :class:`WorkerWatch` reads the same events for
the two facts the exit code needs: the worker's error, and whether the user
stopped it (SIGINT/SIGTERM).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from taskq.app.worker import events


class WorkerWatch(logging.Handler):
    """Notes what the worker's events say about how it ended."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.error: str | None = None  # the first error the worker logged
        self.signalled = False  # a SIGINT/SIGTERM reached the worker

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        raw: Any = getattr(record, "fields", None)
        fields: dict[str, Any] = raw if isinstance(raw, dict) else {}
        # The until-idle drain requests the shutdown too; only SIG* reasons are the user.
        if event == events.SHUTDOWN_SIGNAL and str(fields.get("signal", "")).startswith("SIG"):
            self.signalled = True
        if record.levelno >= logging.ERROR and self.error is None:
            error = fields.get("error")
            self.error = str(error) if error else str(event or record.getMessage())


@contextlib.contextmanager
def worker_log(path: str) -> Iterator[WorkerWatch]:
    """Send every log record to ``path`` (console format) and watch the worker's events.

    The root logger is restored on exit. An empty log (the demo stopped before
    anything was logged) is removed.
    """
    root = logging.getLogger()
    before_handlers = list(root.handlers)
    before_level = root.level
    worker_logger = logging.getLogger(events.LOGGER_NAME)
    watch = WorkerWatch()
    log_file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in the finally
    events.configure_logging(log_format="console", level="INFO", stream=log_file)
    worker_logger.addHandler(watch)
    try:
        yield watch
    finally:
        worker_logger.removeHandler(watch)
        for handler in list(root.handlers):
            if handler not in before_handlers:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(before_level)
        log_file.close()
        with contextlib.suppress(OSError):
            if os.path.getsize(path) == 0:
                os.remove(path)


__all__ = ["WorkerWatch", "worker_log"]
