"""The liveness registry: interval-driven loops tick here, the watchdog reads it."""

from __future__ import annotations

from taskq.domain.watchdog import LivenessTable
from taskq.ports.clock import Clock


class Liveness:
    """Owns the worker's :class:`LivenessTable` (swapped on every tick).

    A loop calls :meth:`tick` once per iteration with its cadence; a gated
    loop calls :meth:`forget` when its gate closes (e.g. no longer leader),
    so an idle gate never looks like a hang.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.table = LivenessTable()
        #: Whether any loop ticked yet (the loop-lag detector arms on the first tick).
        self.ticked = False

    def __repr__(self) -> str:
        return f"Liveness({self.table!r})"

    def tick(self, name: str, period: float) -> None:
        self.table = self.table.tick(name, period, self._clock.monotonic())
        self.ticked = True

    def register(self, name: str, period: float) -> None:
        """Watch ``name`` from now, before its first tick: its age counts from its start
        (a loop whose first tick is a period away is listed, and judged, meanwhile). Not
        a tick: the loop-lag detector still arms on the first real one."""
        self.table = self.table.tick(name, period, self._clock.monotonic())

    def forget(self, name: str) -> None:
        self.table = self.table.forget(name)

    def tick_ages(self) -> dict[str, float]:
        return self.table.tick_ages(self._clock.monotonic())
