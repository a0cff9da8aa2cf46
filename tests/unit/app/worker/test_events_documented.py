"""Every event the worker logs is in the events table of docs/worker-reference.md.

An operator alerts and searches on event names: one the docs do not list is
one nobody knows to look for.
"""

from __future__ import annotations

import re
from pathlib import Path

from taskq.app.worker import events

DOC = Path(__file__).resolve().parents[4] / "docs" / "worker-reference.md"


def _event_names() -> set[str]:
    return {
        value
        for name, value in vars(events).items()
        if name.isupper() and name != "LOGGER_NAME" and isinstance(value, str)
        if re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)+", value)
    }


def _documented() -> set[str]:
    text = DOC.read_text()
    section = text.split("\n## Log events\n", 1)[1].split("\n## ", 1)[0]
    first_cells = (line.split("|")[1] for line in section.splitlines() if line.startswith("| `"))
    return {name for cell in first_cells for name in re.findall(r"`([a-z0-9-]+)`", cell)}


def test_the_events_module_has_event_names() -> None:
    assert {"worker-started", "job-interrupted", "leases-reclaimed"} <= _event_names()


def test_every_worker_event_is_in_the_docs_events_table() -> None:
    missing = sorted(_event_names() - _documented())
    assert missing == [], f"add these events to the 'Log events' table of {DOC.name}: {missing}"
