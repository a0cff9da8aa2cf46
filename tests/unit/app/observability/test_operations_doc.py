"""The operations pages agree with the code: the guide's pod grace period against
TASKQ_TERMINATION_GRACE_PERIOD's default; the reference's no-leader alert rule, its
metric table and its table of /ready reasons."""

from __future__ import annotations

import re
from pathlib import Path

from taskq.app.observability import readiness
from taskq.app.observability.metric_names import METRICS
from taskq.app.settings import WorkerSettings

DOCS = Path(__file__).resolve().parents[4] / "docs"
GUIDE = DOCS / "operations.md"
REFERENCE = DOCS / "operations-reference.md"


def _block_with(page: Path, text: str) -> str:
    """The fenced yaml block of ``page`` that holds ``text``."""
    blocks: list[str] = re.findall(
        r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL
    )
    [block] = [block for block in blocks if text in block]
    return block


def _indent(block: str, key: str) -> int:
    [line] = [line for line in block.splitlines() if line.lstrip().startswith(key)]
    return len(line) - len(line.lstrip())


def _table_rows(page: Path, heading: str) -> list[list[str]]:
    """The cells of each row of the first table after ``heading``."""
    text = page.read_text(encoding="utf-8")
    section = text[text.index(f"\n{heading}\n") :]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # past the header and its rule


def test_the_pods_grace_period_is_above_the_workers_default() -> None:
    default = WorkerSettings.model_fields["termination_grace_period"].get_default()
    block = _block_with(GUIDE, "terminationGracePeriodSeconds")
    [seconds] = re.findall(r"terminationGracePeriodSeconds: (\d+)", block)
    assert float(seconds) > default
    assert f"({default:g} s by default)" in block
    # A pod field beside `containers:`, the probes inside a container.
    assert _indent(block, "terminationGracePeriodSeconds:") == _indent(block, "containers:")
    assert _indent(block, "livenessProbe:") > _indent(block, "containers:")


def test_the_no_leader_alert_fires_with_no_worker_scraped_and_waits_two_minutes() -> None:
    block = _block_with(REFERENCE, "TaskQNoLeader")
    rule = block[block.index("alert: TaskQNoLeader") :].split("- alert:")[0]
    assert "expr: sum(taskq_is_leader) < 1 or absent(taskq_is_leader)" in rule
    assert "for: 2m" in rule


def test_every_metric_is_in_the_reference_with_its_names_type_and_labels() -> None:
    rows = {row[0].strip("`"): row for row in _table_rows(REFERENCE, "### Every metric")}
    for metric in METRICS:
        row = rows.get(metric.prometheus)
        assert row is not None, f"{metric.prometheus} is not in the metric table"
        otel, kind, labels = (cell.strip("`") for cell in row[1:4])
        assert otel == metric.otel, metric.name
        assert kind == metric.kind, metric.name
        assert labels == (", ".join(metric.labels) or "—"), metric.name


def test_every_ready_reason_is_in_the_reference() -> None:
    # readiness.py's upper-case string constants are exactly the reason codes.
    codes = {
        value
        for name, value in vars(readiness).items()
        if name.isupper() and isinstance(value, str)
    }
    assert len(codes) >= 6
    heading = "### Why `/ready` is 503, and what to do"
    documented = {row[0].strip("`") for row in _table_rows(REFERENCE, heading)}
    assert documented == codes
