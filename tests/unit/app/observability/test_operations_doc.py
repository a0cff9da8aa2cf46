"""docs/operations.md's pasteable examples agree with the code: the pod's grace period
against TASKQ_TERMINATION_GRACE_PERIOD's default, the no-leader alert's rule."""

from __future__ import annotations

import re
from pathlib import Path

from taskq.app.settings import WorkerSettings

DOC = Path(__file__).resolve().parents[4] / "docs" / "operations.md"


def _block_with(text: str) -> str:
    """The fenced yaml block of the page that holds ``text``."""
    blocks: list[str] = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    [block] = [block for block in blocks if text in block]
    return block


def _indent(block: str, key: str) -> int:
    [line] = [line for line in block.splitlines() if line.lstrip().startswith(key)]
    return len(line) - len(line.lstrip())


def test_the_pods_grace_period_is_above_the_workers_default() -> None:
    default = WorkerSettings.model_fields["termination_grace_period"].get_default()
    block = _block_with("terminationGracePeriodSeconds")
    [seconds] = re.findall(r"terminationGracePeriodSeconds: (\d+)", block)
    assert float(seconds) > default
    assert f"({default:g} s by default)" in block
    # A pod field beside `containers:`, the probes inside a container.
    assert _indent(block, "terminationGracePeriodSeconds:") == _indent(block, "containers:")
    assert _indent(block, "livenessProbe:") > _indent(block, "containers:")


def test_the_no_leader_alert_fires_with_no_worker_scraped_and_waits_two_minutes() -> None:
    block = _block_with("TaskQNoLeader")
    rule = block[block.index("alert: TaskQNoLeader") :].split("- alert:")[0]
    assert "expr: sum(taskq_is_leader) < 1 or absent(taskq_is_leader)" in rule
    assert "for: 2m" in rule
