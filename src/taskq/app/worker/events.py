"""Structured worker logs: one event name per record, fields as data.

Every record the worker emits carries ``record.event`` (a name from the
worker guide, e.g. ``actors-on-unconsumed-queues``) and ``record.fields`` (a
dict of JSON-able values), so tests and log pipelines match on data, not on
message text. :func:`configure_logging` renders them per ``TASKQ_LOG_FORMAT``:

- ``json``: one object per line, ``{"ts", "level", "logger", "event", ...fields}``;
- ``console``: ``<ts> <LEVEL> <event>  key=<json>  key=<json>``, the layout the
  guide uses in its examples.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, TextIO

LOGGER_NAME: Final = "taskq.worker"
log = logging.getLogger(LOGGER_NAME)

# -- event names (the worker guide's, plus the worker's own lifecycle) ------------------

ACTORS_ON_UNCONSUMED_QUEUES: Final = "actors-on-unconsumed-queues"
WORKER_CONSUMES_NO_QUEUES: Final = "worker-consumes-no-queues"
DISPATCH_ACTOR_NOT_FOUND: Final = "dispatch-actor-not-found"
ACTOR_CONFIG_CAPACITY_OVERRIDE: Final = "actor-config-capacity-override"
ACTOR_CONFIG_DRIFT_OVERWRITE: Final = "actor-config-drift-overwrite"
ACTOR_CONFIG_DRIFT: Final = "actor-config-drift"
WORKER_WATCHDOG_TRIP: Final = "worker-watchdog-trip"
WORKER_WATCHDOG_STILL_ALIVE: Final = "worker-watchdog-still-alive"
WORKER_TASK_DUMP: Final = "worker-task-dump"

WORKER_STARTED: Final = "worker-started"
WORKER_STOPPED: Final = "worker-stopped"
WORKER_CONFIG_ERROR: Final = "worker-config-error"
WORKER_START_FAILED: Final = "worker-start-failed"
WORKER_SCHEMA_AHEAD: Final = "worker-schema-ahead"
WORKER_SETTINGS_INERT: Final = "worker-settings-inert"
WORKER_SETTINGS_IGNORED: Final = "worker-settings-ignored"
WORKER_SETTINGS_UNKNOWN: Final = "worker-settings-unknown"
WORKER_REGISTRY_EMPTY: Final = "worker-registry-empty"
LOOP_SCOPE_CONNECTION_SHARED: Final = "loop-scope-connection-shared"
WORKER_SIBLING_CRASHED: Final = "worker-sibling-crashed"
WORKER_SIBLING_RETURNED: Final = "worker-sibling-returned"
WORKER_ISOLATED: Final = "worker-isolated"
WORKER_JOBS_HANDED_BACK: Final = "worker-jobs-handed-back"
WORKER_CLEANUP_FAILED: Final = "worker-cleanup-failed"
WORKER_EXIT_FORCED: Final = "worker-exit-forced"
WORKER_HEALTH_SERVING: Final = "worker-health-serving"

JOB_STARTED: Final = "job-started"
JOB_FINISHED: Final = "job-finished"
JOB_ATTEMPT_FAILED: Final = "job-attempt-failed"
JOB_FAILED: Final = "job-failed"
JOB_LEASE_LOST: Final = "job-lease-lost"
JOB_ORPHAN_RELEASED: Final = "job-orphan-released"
JOB_ORPHAN_DROPPED: Final = "job-orphan-dropped"
JOB_STILL_RUNNING_HERE: Final = "job-still-running-here"
JOB_WRITE_FAILED: Final = "job-write-failed"
JOB_CANCEL_REQUESTED: Final = "job-cancel-requested"
JOB_CANCEL_FORCED: Final = "job-cancel-forced"
JOB_ABANDONED: Final = "job-abandoned"
JOB_INTERRUPTED: Final = "job-interrupted"
JOB_RECLAIMED: Final = "job-reclaimed"
JOB_HANDED_BACK: Final = "job-handed-back"
JOB_LEFT_TO_LEASE: Final = "job-left-to-lease"
JOB_TIMED_OUT: Final = "job-timed-out"
JOB_TIMEOUT_FORCED: Final = "job-timeout-forced"
JOB_TIMEOUT_ABANDONED: Final = "job-timeout-abandoned"
PRODUCER_CLAIM_FAILED: Final = "producer-claim-failed"

DISPATCH_RATE_LIMITED: Final = "dispatch-rate-limited"
DISPATCH_RESERVATION_UNAVAILABLE: Final = "dispatch-reservation-unavailable"
DISPATCH_RATE_LIMITER_UNAVAILABLE: Final = "dispatch-rate-limiter-unavailable"
RATE_LIMIT_RELEASE_FAILED: Final = "rate-limit-release-failed"
RATE_LIMIT_REFUND_FAILED: Final = "rate-limit-refund-failed"

HEARTBEAT_FAILED: Final = "heartbeat-failed"
WORKER_REREGISTERED: Final = "worker-reregistered"
NOTIFY_UNHEALTHY: Final = "notify-unhealthy"
NOTIFY_START_FAILED: Final = "notify-start-failed"
NOTIFY_RECOVERED: Final = "notify-recovered"

LEADER_ELECTED: Final = "leader-elected"
LEADER_LOST: Final = "leader-lost"
LEADER_RELEASED: Final = "leader-released"
LEADER_TASK_FAILED: Final = "leader-task-failed"
LEASES_RECLAIMED: Final = "leases-reclaimed"
DEADLINES_FAILED: Final = "deadlines-failed"
STALE_WORKERS_REMOVED: Final = "stale-workers-removed"
QUEUE_DEPTH: Final = "queue-depth"
STRANDED_ACTORS: Final = "stranded-actors"
PRUNE_COMPLETED: Final = "prune-completed"
ARCHIVE_EXPIRY_COMPLETED: Final = "archive-expiry-completed"
CRON_ENQUEUED: Final = "cron-enqueued"
UNTIL_IDLE_WITH_CRON: Final = "until-idle-with-cron"

SHUTDOWN_SIGNAL: Final = "shutdown-signal"
SHUTDOWN_PHASE: Final = "shutdown-phase"
SHUTDOWN_HARD_EXIT: Final = "shutdown-hard-exit"
UNTIL_IDLE_DRAINED: Final = "until-idle-drained"
UNTIL_IDLE_MAX_RUNTIME: Final = "until-idle-max-runtime"
UNTIL_IDLE_STRANDED: Final = "until-idle-stranded"
UNTIL_IDLE_POLL_FAILED: Final = "until-idle-poll-failed"


def emit(
    event: str,
    level: int = logging.INFO,
    *,
    exc_info: bool = False,
    traceback: str | None = None,
    **fields: Any,
) -> None:
    """Log ``event`` with ``fields`` on the worker logger.

    ``traceback`` is a traceback already formatted (an exception that is gone,
    such as a failed attempt's): it becomes the record's ``exc_text``, which
    every formatter prints as it prints a logged exception.
    """
    if not log.isEnabledFor(level):
        return
    extra = {"event": event, "fields": fields}
    if traceback is None:
        log.log(level, event, extra=extra, exc_info=exc_info)
        return
    path, line, func, _ = log.findCaller()
    record = log.makeRecord(log.name, level, path, line, event, (), None, func, extra)
    record.exc_text = traceback.rstrip("\n")
    log.handle(record)


# -- rendering -------------------------------------------------------------------------


#: What every LogRecord carries; anything else came in through ``extra=``.
_RECORD_ATTRS: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
    "event",
    "fields",
}


def _fields_of(record: logging.LogRecord) -> Mapping[str, Any]:
    """A worker event's fields, then what any other logger passed as ``extra=`` (the
    adapters log that way: they cannot import this module)."""
    fields = getattr(record, "fields", None)
    out = dict(fields) if isinstance(fields, Mapping) else {}
    for key, value in vars(record).items():
        if key not in _RECORD_ATTRS and not key.startswith("_"):
            out.setdefault(key, value)
    return out


def _event_of(record: logging.LogRecord) -> str:
    event = getattr(record, "event", None)
    return event if isinstance(event, str) else record.getMessage()


def _timestamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


class JsonFormatter(logging.Formatter):
    """One JSON object per record; a worker event's fields become top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "event": _event_of(record),
        }
        for key, value in _fields_of(record).items():
            body.setdefault(key, value)
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:  # a traceback formatted before (see emit)
            body["exception"] = record.exc_text
        return _dumps(body)


class ConsoleFormatter(logging.Formatter):
    """``<ts> <LEVEL> <event>  key=<json> ...`` for humans at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [f"{_timestamp(record)} {record.levelname:<8} {_event_of(record)}"]
        parts.extend(f"{key}={_dumps(value)}" for key, value in _fields_of(record).items())
        line = "  ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        elif record.exc_text:  # a traceback formatted before (see emit)
            line += "\n" + record.exc_text
        return line


class _TaskQHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler :func:`configure_logging` installed, so a second call replaces it."""


def configure_logging(*, log_format: str, level: str, stream: TextIO | None = None) -> None:
    """Send every log record to ``stream`` (stderr) as ``json`` or ``console``; set the level.

    Configures the root logger (``TASKQ_LOG_LEVEL`` is the root level), so
    application loggers come out in the same format. Idempotent.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _TaskQHandler):
            root.removeHandler(handler)
    handler = _TaskQHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else ConsoleFormatter())
    handler.setLevel(level)  # also filters loggers someone set to a lower level
    root.addHandler(handler)
    root.setLevel(level)


def flush_logs() -> None:
    """Flush every root handler (before a hard exit, which skips interpreter cleanup)."""
    for handler in logging.getLogger().handlers:
        # A broken stream must not block the exit.
        with contextlib.suppress(Exception):
            handler.flush()
