"""The results table: each TaskQ number beside its raw baseline, the ratio, the goal, a verdict.

A row's verdict is PASS or FAIL against the product goal, or "info" for a
number shown for context only. Rendered as aligned text (the terminal) or as
a Markdown table (docs/benchmarks.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Row:
    """One measurement. ``passed`` is None for a context-only row."""

    name: str
    value: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    passed: bool | None = None

    @property
    def verdict(self) -> str:
        if self.passed is None:
            return "info"
        return "PASS" if self.passed else "FAIL"


HEADER = ("measurement", "TaskQ", "raw baseline", "ratio", "target", "result")


def rate(value: float) -> str:
    """A jobs/s figure, rounded to what a noisy machine can tell apart."""
    if math.isnan(value):
        return "n/a"
    return f"{value:,.0f}/s"


def millis(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f} ms"


def pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.0%}"


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio_row(
    name: str,
    values: Sequence[float],
    baselines: Sequence[float],
    baseline_label: str,
    need: float | None,
    target: str = "",
) -> Row:
    """A row judged by the median over rounds of ``value / baseline >= need``
    (``need`` None: an info row, shown for context).

    ``values[i]`` and ``baselines[i]`` were measured in the same round, side
    by side, so each ratio compares numbers taken under the same load; the
    rates shown are the medians, and the ratio's range over rounds follows it.
    """
    ratios = [v / b if b > 0 else float("nan") for v, b in zip(values, baselines, strict=True)]
    ratio = median(ratios)
    shown = pct(ratio)
    if len(ratios) > 1:
        shown += f" ({pct(min(ratios))}–{pct(max(ratios))})"
    return Row(
        name,
        rate(median(values)),
        f"{rate(median(baselines))} ({baseline_label})",
        shown,
        target,
        passed=None if need is None else not math.isnan(ratio) and ratio >= need,
    )


def _cells(row: Row) -> tuple[str, ...]:
    return (row.name, row.value, row.baseline, row.ratio, row.target, row.verdict)


def as_text(rows: Sequence[Row]) -> str:
    table = [HEADER, *(_cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]

    def line(cells: Sequence[str]) -> str:
        padded = (cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(HEADER), rule, *(line(c) for c in table[1:])])


def as_markdown(rows: Sequence[Row]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(HEADER), line(["---"] * len(HEADER)), *(line(_cells(r)) for r in rows)])
