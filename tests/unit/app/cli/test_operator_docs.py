"""The guides point operators at the commands that exist, with pipelines safe to paste."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[4] / "docs"


def test_the_actor_guide_points_at_actor_config() -> None:
    """docs/actors-and-client.md said there was no `taskq actor-config` command yet."""
    text = " ".join((DOCS / "actors-and-client.md").read_text(encoding="utf-8").split())
    assert "no `taskq actor-config` command" not in text
    assert "cli.md#taskq-actor-config" in text


def test_every_xargs_in_the_runbook_runs_nothing_on_empty_input() -> None:
    """Without -r, an empty job list ran `taskq jobs retry` with no id (a usage error)."""
    text = (DOCS / "runbook.md").read_text(encoding="utf-8")
    uses = re.findall(r"xargs[^\n|]*", text)
    assert uses
    assert all(re.search(r"\s-r\b", use) for use in uses), uses
