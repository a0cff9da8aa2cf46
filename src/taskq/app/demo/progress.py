"""The live progress display: counts by status while the worker runs.

At a terminal it redraws in place (``rich``, which Typer already depends on)
about four times a second. Anywhere else (a pipe, a CI log) it prints one
plain line at most once a second, and a last line at the end, so logs stay
readable.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import IO, Final, Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

#: How often the sampler reads the counts (the display refreshes with it).
SAMPLE_INTERVAL: Final = 0.25
#: The fewest seconds between two lines when the output is not a terminal.
LINE_INTERVAL: Final = 1.0
#: The window of the "now" rate (jobs/s).
RATE_WINDOW: Final = 2.0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One sample: the demo's jobs by status, ``elapsed`` seconds into the worker run."""

    elapsed: float
    total: int
    pending: int
    scheduled: int
    running: int
    succeeded: int
    failed: int
    retried: int  # failed attempts that were rescheduled
    rate: float  # jobs finished per second, over the last RATE_WINDOW seconds

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed

    def line(self) -> str:
        return (
            f"[{self.elapsed:5.1f}s] pending {self.pending}  scheduled {self.scheduled}  "
            f"running {self.running}  succeeded {self.succeeded}  failed {self.failed}  "
            f"(retried attempts {self.retried})  {self.rate:.0f} jobs/s"
        )


class RateMeter:
    """Finished jobs per second over a sliding window of samples."""

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self._window = window
        self._samples: collections.deque[tuple[float, int]] = collections.deque()
        self.peak = 0.0

    def add(self, at: float, finished: int) -> float:
        self._samples.append((at, finished))
        while len(self._samples) > 2 and at - self._samples[1][0] >= self._window:
            self._samples.popleft()
        first_at, first_done = self._samples[0]
        rate = (finished - first_done) / (at - first_at) if at > first_at else 0.0
        self.peak = max(self.peak, rate)
        return rate


class ProgressView(Protocol):
    def show(self, snapshot: Snapshot) -> None: ...

    def close(self, snapshot: Snapshot | None) -> None: ...


class LineView:
    """Plain lines, at most one per ``interval`` seconds (plus the last one)."""

    def __init__(self, stream: IO[str], *, interval: float = LINE_INTERVAL) -> None:
        self._stream = stream
        self._interval = interval
        self._last_at: float | None = None
        self._last_line = ""

    def show(self, snapshot: Snapshot) -> None:
        if self._last_at is not None and snapshot.elapsed - self._last_at < self._interval:
            return
        self._print(snapshot)

    def close(self, snapshot: Snapshot | None) -> None:
        if snapshot is not None and snapshot.line() != self._last_line:
            self._print(snapshot)

    def _print(self, snapshot: Snapshot) -> None:
        self._last_at = snapshot.elapsed
        self._last_line = snapshot.line()
        print(self._last_line, file=self._stream, flush=True)


class LiveView:
    """A bar and the counts, redrawn in place on a terminal."""

    def __init__(self, console: Console) -> None:
        self._live = Live(console=console, auto_refresh=False, transient=False)
        self._started = False

    def show(self, snapshot: Snapshot) -> None:
        if not self._started:
            self._live.start()
            self._started = True
        self._live.update(render(snapshot), refresh=True)

    def close(self, snapshot: Snapshot | None) -> None:
        if snapshot is not None:
            self.show(snapshot)
        if self._started:
            self._live.stop()


def render(s: Snapshot) -> Group:
    """The live panel: a bar of finished jobs, the jobs by status, retries and rate."""
    bar = Table.grid(padding=(0, 2))
    bar.add_row(
        ProgressBar(total=max(s.total, 1), completed=s.finished, width=40),
        Text(f"{s.finished}/{s.total} finished", style="bold"),
        Text(f"{s.elapsed:.1f} s", style="dim"),
    )
    statuses = Text("  ").join(
        Text.assemble((name, style), f" {count}")
        for name, count, style in (
            ("pending", s.pending, "yellow"),
            ("scheduled", s.scheduled, "blue"),
            ("running", s.running, "cyan"),
            ("succeeded", s.succeeded, "green"),
            ("failed", s.failed, "red"),
        )
    )
    extra = Text.assemble(
        ("retried attempts", "magenta"), f" {s.retried}    ", (f"{s.rate:.0f} jobs/s", "bold")
    )
    return Group(bar, statuses, extra)


def make_view(console: Console) -> ProgressView:
    """A live view when the console writes to a terminal, else plain lines."""
    stream = console.file
    is_tty = stream.isatty() and console.is_terminal
    return LiveView(console) if is_tty else LineView(stream)


__all__ = [
    "LINE_INTERVAL",
    "SAMPLE_INTERVAL",
    "LineView",
    "LiveView",
    "ProgressView",
    "RateMeter",
    "Snapshot",
    "make_view",
    "render",
]
