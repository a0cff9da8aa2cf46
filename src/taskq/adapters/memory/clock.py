"""A fake clock for tests: time moves only when the test says so.

``FakeClock`` satisfies the ``Clock`` port. Time is kept in whole
microseconds (the resolution of ``datetime``), so ``now()`` values are exact
and sums of small steps never drift.

How a test drives it::

    clock = FakeClock()
    task = asyncio.create_task(worker_loop(clock))   # sleeps on clock.sleep(...)
    await clock.advance_async(30)   # step through every deadline up to +30 s,
                                    # letting woken tasks run after each step
    clock.advance(5)                # jump at once; due sleepers' futures resolve
    await clock.run_until_idle()    # let the woken tasks actually run

``advance`` is synchronous: it moves time and resolves the futures of the due
sleepers (in deadline order), but the woken tasks only run when the test
yields to the event loop. ``advance_async`` and ``run_until_idle`` do that
yielding.

Work outside the event loop (a sync actor in its thread) is invisible to the
loop, which looks idle meanwhile: ``hold()`` keeps fake time still until the
returned ``release`` is called, ``run_until_idle`` (so ``advance_async``)
waiting for it in real time, at most ``HOLD_LIMIT`` seconds per hold (a
thread that never returns must not hang the test). The worker holds the
clock while a sync actor runs.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Final

#: Where a FakeClock starts unless told otherwise (the contract suite's EPOCH).
DEFAULT_START: Final = datetime(2030, 1, 1, tzinfo=UTC)

_US_PER_S: Final = 1_000_000
_ONE_US: Final = timedelta(microseconds=1)
#: Upper bound on loop iterations in :meth:`FakeClock.run_until_idle`, so a
#: task that never parks cannot hang the test.
_MAX_IDLE_ROUNDS: Final = 10_000
#: Iterations used when the loop does not expose its ready queue.
_FALLBACK_IDLE_ROUNDS: Final = 100
#: Real seconds one :meth:`FakeClock.hold` can keep fake time still.
HOLD_LIMIT: Final = 5.0


def _check_seconds(seconds: float, what: str) -> None:
    if math.isnan(seconds):
        raise ValueError(f"{what}: seconds must be a number, got NaN")


def _ready_count(loop: asyncio.AbstractEventLoop) -> int | None:
    # CPython's loops keep runnable callbacks in ``_ready``; reading its length
    # is the only way to know that nothing is left to run. Loops without it
    # (uvloop) fall back to a fixed number of iterations.
    ready = getattr(loop, "_ready", None)
    return len(ready) if ready is not None else None


class FakeClock:
    """A ``Clock`` whose time advances only through :meth:`advance` and friends.

    - ``now()`` is ``start`` plus the elapsed fake time (timezone-aware UTC).
    - ``monotonic()`` is the elapsed fake time in seconds, starting at 0.0.
    - ``sleep(s)`` returns once the clock has been advanced by at least ``s``
      since the call (rounded up to a microsecond); ``sleep(0)`` (or less) only
      yields to the loop. Sleepers wake in deadline order, ties in call order.
      A cancelled sleep simply goes away.
    """

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        if start.tzinfo is None or start.utcoffset() != timedelta(0):
            raise ValueError(f"FakeClock start must be timezone-aware UTC, got {start!r}")
        self._start = start.astimezone(UTC)
        self._elapsed_us = 0
        self._seq = itertools.count()
        # (deadline in µs, tie-break sequence, future); math.inf never fires.
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        # hold() futures -> the real (time.monotonic) time after which they no longer hold.
        self._holds: dict[asyncio.Future[None], float] = {}

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now().isoformat()}, pending_sleepers={self.pending_sleepers})"

    # --- the Clock port -------------------------------------------------------------

    def now(self) -> datetime:
        return self._start + timedelta(microseconds=self._elapsed_us)

    def monotonic(self) -> float:
        return self._elapsed_us / _US_PER_S

    async def sleep(self, seconds: float) -> None:
        _check_seconds(seconds, "sleep")
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        deadline: float = (
            math.inf if math.isinf(seconds) else self._elapsed_us + math.ceil(seconds * _US_PER_S)
        )
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._seq), future))
        try:
            await future
        finally:
            # Cancelling the awaiting task cancels the future already; this covers
            # any other way out (e.g. the coroutine being closed).
            if not future.done():
                future.cancel()

    # --- test controls --------------------------------------------------------------

    @property
    def pending_sleepers(self) -> int:
        """How many ``sleep`` calls are waiting for time to advance."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def next_deadline(self) -> float | None:
        """Seconds from now until the earliest pending sleeper wakes (None: no sleeper)."""
        self._drop_finished()
        if not self._sleepers or math.isinf(self._sleepers[0][0]):
            return None
        return (self._sleepers[0][0] - self._elapsed_us) / _US_PER_S

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and wake every sleeper now due.

        Synchronous: woken tasks run the next time the caller yields to the loop
        (see :meth:`run_until_idle`). Rounds to the nearest microsecond.
        """
        _check_seconds(seconds, "advance")
        if seconds < 0 or math.isinf(seconds):
            raise ValueError(f"advance: seconds must be finite and >= 0, got {seconds}")
        self._elapsed_us += round(seconds * _US_PER_S)
        self._wake_due()

    def advance_to(self, when: datetime) -> None:
        """Move time forward to the wall time ``when`` (never backwards)."""
        delta = when - self.now()
        if delta < timedelta(0):
            raise ValueError(f"advance_to: {when.isoformat()} is before now ({self.now()})")
        self._elapsed_us += delta // _ONE_US
        self._wake_due()

    async def advance_async(self, seconds: float) -> None:
        """Advance by ``seconds`` one sleeper deadline at a time, letting tasks run.

        Before each step and at the end it runs the loop until idle, so a
        periodic loop sleeping 10 s runs six times during ``advance_async(60)``,
        each time seeing the clock at its own deadline.
        """
        _check_seconds(seconds, "advance_async")
        if seconds < 0 or math.isinf(seconds):
            raise ValueError(f"advance_async: seconds must be finite and >= 0, got {seconds}")
        target = self._elapsed_us + round(seconds * _US_PER_S)
        await self.run_until_idle()
        while True:
            self._drop_finished()
            if not self._sleepers or self._sleepers[0][0] > target:
                break
            self._elapsed_us = max(self._elapsed_us, int(self._sleepers[0][0]))
            self._wake_due()
            await self.run_until_idle()
        self._elapsed_us = target
        self._wake_due()
        await self.run_until_idle()

    def hold(self, limit: float = HOLD_LIMIT) -> Callable[[], None]:
        """Keep fake time still until the returned callable is called (or ``limit`` real
        seconds passed): :meth:`run_until_idle` waits for it. Call both on the loop."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._holds[future] = time.monotonic() + limit

        def release() -> None:
            self._holds.pop(future, None)
            if not future.done():
                future.set_result(None)

        return release

    async def run_until_idle(self) -> None:
        """Yield to the event loop until no other callback is ready to run and no
        :meth:`hold` is pending (waited for in real time).

        Time does not move. Tasks parked on a future (a fake sleep, a queue, an
        event) count as idle. On loops that hide their ready queue this yields
        a fixed number of times instead.
        """
        while True:
            await self._run_loop_until_idle()
            now = time.monotonic()
            for future, until in list(self._holds.items()):
                if until <= now:
                    del self._holds[future]  # held too long: let time move
            if not self._holds:
                return
            until = min(self._holds.values())
            await asyncio.wait(
                list(self._holds), timeout=until - now, return_when=asyncio.FIRST_COMPLETED
            )

    async def _run_loop_until_idle(self) -> None:
        loop = asyncio.get_running_loop()
        if _ready_count(loop) is None:
            for _ in range(_FALLBACK_IDLE_ROUNDS):
                await asyncio.sleep(0)
            return
        for _ in range(_MAX_IDLE_ROUNDS):
            await asyncio.sleep(0)
            if not _ready_count(loop):
                return

    # --- internals ------------------------------------------------------------------

    def _wake_due(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._elapsed_us:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def _drop_finished(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)


__all__ = ["DEFAULT_START", "HOLD_LIMIT", "FakeClock"]
