"""How the operator commands print: a table for people, ``--json`` for scripts.

JSON field names are part of the CLI's contract (docs/cli.md): a ``list``
prints one array of objects, a ``get`` one object. Times are ISO 8601 in UTC
in JSON, and to the second in tables. Table cells are printed as they are
(no markup: a job's error may hold brackets).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON (stable field names) instead of a table.")
]


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout."""
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def print_table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, empty: str) -> None:
    """A table with ``headers``; the line ``empty`` when there is no row."""
    table = Table(
        *headers, box=box.SIMPLE_HEAD, header_style="bold", show_edge=False, pad_edge=False
    )
    count = 0
    for row in rows:
        table.add_row(*row)
        count += 1
    if not count:
        typer.echo(empty)
        return
    _console().print(table)


def print_fields(pairs: Iterable[tuple[str, str]]) -> None:
    """``name: value`` lines, names aligned (one record, as ``get`` shows it)."""
    items = list(pairs)
    width = max((len(name) for name, _ in items), default=0)
    for name, value in items:
        typer.echo(f"{name + ':':<{width + 1}} {value}")


def _console() -> Console:
    # A pipe gets whole lines (no wrapping at 80 columns) and no colour codes.
    tty = sys.stdout.isatty()
    return Console(
        file=sys.stdout,
        width=None if tty else 10_000,
        markup=False,
        highlight=False,
        emoji=False,
        no_color=not tty,
    )


def iso(value: datetime | None) -> str | None:
    """A time for JSON: ISO 8601 in UTC, or None."""
    return None if value is None else value.astimezone(UTC).isoformat()


def when(value: datetime | None) -> str:
    """A time for a table: UTC to the second, ``-`` for none."""
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(value: timedelta | None) -> str:
    """A duration for a table (``3d 4h``, ``5m 2s``, ``0s``), ``-`` for none."""
    if value is None:
        return "-"
    seconds = int(value.total_seconds())
    sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    shown = [f"{n}{unit}" for n, unit in parts if n][:2]
    return sign + (" ".join(shown) if shown else "0s")


def text(value: object) -> str:
    """A cell: ``-`` for None, else the value as text."""
    return "-" if value is None else str(value)


__all__ = [
    "JsonOption",
    "duration",
    "iso",
    "print_fields",
    "print_json",
    "print_table",
    "text",
    "when",
]
