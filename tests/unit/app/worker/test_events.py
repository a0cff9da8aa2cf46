"""Structured worker logs rendered as JSON or console lines (TASKQ_LOG_FORMAT)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from taskq.app.worker import events


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Put the root logger back as it was (configure_logging changes it)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_carry_the_event_and_its_fields(root_logging: None) -> None:
    """In json format a record is one object with the event name and fields as keys."""
    out = io.StringIO()
    events.configure_logging(log_format="json", level="INFO", stream=out)
    events.emit(
        events.ACTORS_ON_UNCONSUMED_QUEUES,
        logging.WARNING,
        actors={"mailer": "email"},
        queues=["email"],
        worker_queues=["default"],
    )
    [line] = out.getvalue().splitlines()
    body = json.loads(line)
    assert body["event"] == "actors-on-unconsumed-queues"
    assert body["level"] == "WARNING"
    assert body["logger"] == "taskq.worker"
    assert body["actors"] == {"mailer": "email"}
    assert body["worker_queues"] == ["default"]


def test_console_lines_match_the_guides_layout(root_logging: None) -> None:
    """In console format fields follow the event name as key=<json>."""
    out = io.StringIO()
    events.configure_logging(log_format="console", level="INFO", stream=out)
    events.emit(events.WORKER_CONSUMES_NO_QUEUES, logging.WARNING, worker_queues=[])
    line = out.getvalue().strip()
    assert line.endswith("WARNING  worker-consumes-no-queues  worker_queues=[]")


def test_level_filters_and_reconfiguring_replaces_the_handler(root_logging: None) -> None:
    """TASKQ_LOG_LEVEL filters; a second configure_logging does not duplicate lines."""
    first, second = io.StringIO(), io.StringIO()
    events.configure_logging(log_format="json", level="INFO", stream=first)
    events.configure_logging(log_format="json", level="WARNING", stream=second)
    events.emit(events.WORKER_STARTED, logging.INFO, worker_id="w")
    events.emit(events.HEARTBEAT_FAILED, logging.WARNING, consecutive_failures=1)
    assert first.getvalue() == ""
    assert [json.loads(x)["event"] for x in second.getvalue().splitlines()] == ["heartbeat-failed"]


def test_exceptions_are_rendered(root_logging: None) -> None:
    """exc_info=True attaches the traceback to the record's output."""
    out = io.StringIO()
    events.configure_logging(log_format="json", level="INFO", stream=out)
    try:
        raise ValueError("kaput")
    except ValueError:
        events.emit(events.WORKER_SIBLING_CRASHED, logging.ERROR, exc_info=True, loop="x")
    body = json.loads(out.getvalue())
    assert "ValueError: kaput" in body["exception"]


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_an_adapters_extra_fields_are_rendered(root_logging: None, log_format: str) -> None:
    """Adapters log their events with ``extra=`` (they cannot import the worker's events);
    the formatters dropped those fields: leader-lock-lost came out with no lock_key or error."""
    out = io.StringIO()
    events.configure_logging(log_format=log_format, level="INFO", stream=out)
    adapter_log = logging.getLogger("taskq.adapters.postgres.advisory_leader")
    adapter_log.warning("leader-lock-lost", extra={"lock_key": 42, "error": "conn reset"})
    [line] = out.getvalue().splitlines()
    if log_format == "json":
        body = json.loads(line)
        assert (body["event"], body["lock_key"], body["error"]) == (
            "leader-lock-lost",
            42,
            "conn reset",
        )
        assert "msg" not in body  # the record's own attributes stay out
        assert "args" not in body
    else:
        assert "leader-lock-lost" in line
        assert "lock_key=42" in line
        assert 'error="conn reset"' in line
