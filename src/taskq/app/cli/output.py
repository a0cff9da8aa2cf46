"""How the operator commands print: a table for people, ``--json`` for scripts.

JSON field names are part of the CLI's contract (docs/cli.md): a ``list``
prints one array of objects, a ``get`` one object. Times are ISO 8601 in UTC
in JSON, and to the second in tables. Table cells are printed as they are
(no markup: a job's error may hold brackets).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import typer
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout."""
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


#: What separates two table columns: a space and each side's padding.
_GAP = 3
#: The narrowest a column that may shrink gets (unless its header's longest word is wider).
_SHRUNK = 8


def _fit(natural: list[int], least: list[int], room: int) -> list[int]:
    """Column widths: each at least ``least``, the room left given out in column order, up
    to each column's ``natural`` width."""
    widths = list(least)
    spare = room - sum(widths)
    for i, want in enumerate(natural):
        grow = min(max(spare, 0), want - widths[i])
        widths[i] += grow
        spare -= grow
    return widths


def print_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    empty: str,
    keys: Collection[str] = (),
    optional: Sequence[str] = (),
    console: Console | None = None,
) -> None:
    """A table with ``headers``; the line ``empty`` when there is no row.

    Columns named in ``keys`` (ids, names, queues, statuses, modes: what an operator
    copies) are never truncated: they keep their full width. On a narrow terminal the
    columns named in ``optional`` are left out, first named first, while the rest would
    not fit; the others (an error preview, a label) end in an ellipsis, never narrower
    than their header's longest word (its words go on lines of their own). When even
    that does not fit, the table is printed wider than the terminal (its lines wrap)
    rather than cut an identifier.
    """
    body = [list(row) for row in rows]
    if not body:
        typer.echo(empty)
        return
    out = console or _console()
    natural = [
        max(cell_len(header), *(cell_len(row[i]) for row in body))
        for i, header in enumerate(headers)
    ]
    # Keys and optional columns are whole or (optional ones) left out; the others keep
    # their header and at least _SHRUNK characters.
    least = [
        natural[i]
        if header in keys or header in optional
        else max(min(natural[i], _SHRUNK), *(cell_len(word) for word in header.split()))
        for i, header in enumerate(headers)
    ]
    shown = list(range(len(headers)))

    def room() -> int:
        return out.width - _GAP * (len(shown) - 1)

    for name in optional:
        if sum(least[i] for i in shown) <= room():
            break
        if name in headers:
            shown.remove(headers.index(name))
    widths = _fit([natural[i] for i in shown], [least[i] for i in shown], room())
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", show_edge=False, pad_edge=False)
    for i, width in zip(shown, widths, strict=True):
        if headers[i] in keys:
            table.add_column(headers[i], width=width, no_wrap=True, overflow="fold")
        else:
            # A header narrower than its column puts its words on lines of their own.
            header = headers[i] if cell_len(headers[i]) <= width else headers[i].replace(" ", "\n")
            table.add_column(header, width=width, no_wrap=True, overflow="ellipsis")
    for row in body:
        table.add_row(*(row[i] for i in shown))
    total = sum(widths) + _GAP * (len(shown) - 1)
    if total <= out.width:
        out.print(table)
        return
    was = out.width
    out.width = total  # print's own width= is capped at the console's
    try:
        out.print(table)
    finally:
        out.width = was


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


def duration(value: timedelta | None, *, exact: bool = False) -> str:
    """A duration for a table (``3d 4h``, ``5m 2s``, ``0s``), ``-`` for none.

    An age (``exact=False``) shows its two largest whole units. A configured duration
    (``exact=True``: a result_ttl) shows every unit and a fraction of a second, so the
    table says what ``--json`` does in seconds: ``1.5s``, ``1h 30m``, ``1d 0h 0m 1.25s``
    is written ``1d 1.25s``.
    """
    if value is None:
        return "-"
    if exact:
        micros = value // timedelta(microseconds=1)
        sign, micros = ("-", -micros) if micros < 0 else ("", micros)
        seconds, fraction = divmod(micros, 1_000_000)
    else:
        seconds, fraction = int(value.total_seconds()), 0
        sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m")) if n]
    if secs or fraction:
        parts.append(f"{secs}.{fraction:06d}".rstrip("0") + "s" if fraction else f"{secs}s")
    shown = parts if exact else parts[:2]
    return sign + (" ".join(shown) if shown else "0s")


def text(value: object) -> str:
    """A cell: ``-`` for None, else the value as text."""
    return "-" if value is None else str(value)


__all__ = [
    "duration",
    "iso",
    "print_fields",
    "print_json",
    "print_table",
    "text",
    "when",
]
