"""The in-worker watchdog: the domain's detectors, fed with clocks, acted on here.

- Shutdown deadline and stale loop ticks run in one task that lives
  *outside* the worker's TaskGroup (a group child would be cancelled by the
  very sibling crash it exists to catch). It ticks on the worker's Clock.
  While the store is failing only the heartbeat loop is judged stale
  (:data:`JUDGED_WHILE_STORE_FAILS`): a silent partition ends in isolation.
- Event-loop lag runs in a daemon thread on the real monotonic clock: a
  blocked loop cannot time itself, so this one detector cannot use the Clock
  port. The worker starts it only when it runs on the real clock.
- The sibling contract is enforced by the runtime (it stays armed even with
  ``TASKQ_WATCHDOG_ENABLED=false``).

A trip logs ``worker-watchdog-trip`` at CRITICAL (labelled by detector),
dumps every live asyncio task (name, coroutine, await-site frames; never
locals), flushes, and calls ``os._exit(2)``. The in-loop detectors (shutdown
deadline, stale loops) first hand back the jobs the worker still owns, in one
write bounded by ``hand_back.LEAVING_BUDGET`` and backed by a timer thread
that ends the process should even that wedge (the worker guide allows no
further awaits; handing the jobs back is what keeps a trip from costing them
an attempt). The loop-lag thread cannot: the loop it would await on is
blocked, so its jobs are reclaimed by the sweep, as after a crash.
:func:`dump_tasks_on_request` writes the same dump on demand (SIGUSR2) and
the worker goes on.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Final

from taskq.app.worker import events
from taskq.app.worker.task_views import WatchdogView
from taskq.domain.watchdog import (
    LoopLagDetector,
    StillAlive,
    Trip,
    WatchdogSettings,
    judge_shutdown_deadline,
    judge_stale_loops,
)

TripHook = Callable[[Trip], Awaitable[None]]

#: The loops still judged stale while the store is failing (``state.watch.store_suspect``):
#: only the heartbeat, whose every call is bounded and which isolates the worker (exit
#: 1, its jobs handed back) after failed beats. The others (the producer's claim, the
#: election, the leader's steps) may wait on a dead network for the kernel's TCP
#: timeouts; calling them stale would end the worker with exit 2 before it isolates.
#: Their ages still count: once a beat works again, a loop still stuck trips.
JUDGED_WHILE_STORE_FAILS: Final = frozenset({"heartbeat"})
#: Frames per task in a dump: the whole await chain, bounded for very deep ones.
_DUMP_FRAMES: Final = 16
#: Outermost frames kept when a chain is longer (the rest are its innermost: the await site).
_DUMP_OUTER_FRAMES: Final = 2


def _await_chain(coro: object) -> list[str]:
    """``file:line in function`` of each coroutine ``coro`` is suspended in, outermost first.

    ``Task.get_stack`` gives only the task's own frame for a suspended coroutine;
    following ``cr_await`` (``gi_yieldfrom`` for generator-based ones) down to the
    innermost coroutine shows where the task actually waits. Frames only: never
    a local or an argument.
    """
    frames: list[str] = []
    seen: set[int] = set()
    current: object = coro
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frame = getattr(current, "cr_frame", None) or getattr(current, "gi_frame", None)
        if frame is None:
            frame = getattr(current, "ag_frame", None)
        if frame is not None:
            frames.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        current = (
            getattr(current, "cr_await", None)
            or getattr(current, "gi_yieldfrom", None)
            or getattr(current, "ag_await", None)
        )
    if len(frames) > _DUMP_FRAMES:
        inner = _DUMP_FRAMES - _DUMP_OUTER_FRAMES
        skipped = len(frames) - _DUMP_FRAMES
        frames = [*frames[:_DUMP_OUTER_FRAMES], f"... {skipped} frames ...", *frames[-inner:]]
    return frames


def task_dump(loop: asyncio.AbstractEventLoop | None = None) -> list[dict[str, object]]:
    """Every live task of ``loop`` (default: the running one): its name, its coroutine,
    and the frames of its await chain (outermost first, down to where it waits)."""
    try:
        tasks = asyncio.all_tasks(loop)
    except RuntimeError:
        return []
    dump: list[dict[str, object]] = []
    for task in sorted(tasks, key=lambda t: t.get_name()):
        coro = task.get_coro()
        frames = _await_chain(coro)
        if not frames:  # a running task (the dump's own caller), or one already done
            frames = [
                f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
                for frame in task.get_stack(limit=_DUMP_FRAMES)
            ]
        dump.append(
            {
                "name": task.get_name(),
                "coroutine": getattr(coro, "__qualname__", repr(coro)),
                "frames": frames,
            }
        )
    return dump


def report_trip(trip: Trip, loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Log the trip and the task dump at CRITICAL, then flush."""
    events.emit(
        events.WORKER_WATCHDOG_TRIP,
        logging.CRITICAL,
        detector=trip.detector.value,
        reason=trip.reason,
        exit_code=trip.exit_code,
    )
    events.emit(
        events.WORKER_TASK_DUMP, logging.CRITICAL, trigger="watchdog-trip", tasks=task_dump(loop)
    )
    events.flush_logs()


def dump_tasks_on_request(trigger: str = "SIGUSR2") -> None:
    """The on-demand dump: every live task of the running loop, logged and flushed.

    Called on the loop (a signal handler's callback), so the tasks it lists are
    all suspended at their await sites. WARNING, so the default log level shows
    what an operator asked for; nothing else happens, the worker goes on.
    """
    events.emit(events.WORKER_TASK_DUMP, logging.WARNING, trigger=trigger, tasks=task_dump())
    events.flush_logs()


def exit_after(seconds: float, exit_code: int) -> threading.Timer:
    """A started daemon timer that ends the process with ``exit_code`` after ``seconds``:
    the backstop for a last write that could wedge as the rest of the process did."""
    timer = threading.Timer(seconds, os._exit, (exit_code,))
    timer.daemon = True
    timer.start()
    return timer


class ShutdownWatchdog:
    """Shutdown-deadline and stale-loop detectors on the worker's clock."""

    def __init__(
        self,
        state: WatchdogView,
        *,
        settings: WatchdogSettings,
        termination_grace_period: float,
        siblings: Callable[[], list[str]],
        on_trip: TripHook,
    ) -> None:
        self.state = state
        self.settings = settings
        self.termination_grace_period = termination_grace_period
        self.siblings = siblings
        self.on_trip = on_trip

    async def run(self) -> None:
        state, clock, settings = self.state, self.state.clock, self.settings
        period = min(settings.check_interval, settings.dump_interval, 1.0)
        last_report: float | None = None
        next_stale_check = clock.monotonic() + settings.check_interval
        expected = clock.monotonic()
        while True:
            now = clock.monotonic()
            # Woken much later than asked (a blocked loop, or a test jumping a
            # fake clock): give the other loops one round to catch up first.
            late = now - expected > settings.check_interval
            if state.shutdown_event.is_set():
                state.stopping.begin(now)  # set directly, without a signal
            verdict = judge_shutdown_deadline(
                shutdown_started_at=state.stopping.started_at,
                now=now,
                termination_grace_period=self.termination_grace_period,
                dump_interval=settings.dump_interval,
                last_report_at=last_report,
            )
            if isinstance(verdict, Trip) and not late:
                await self.on_trip(verdict)
                return
            if isinstance(verdict, StillAlive) and verdict.report_due:
                last_report = now
                events.emit(
                    events.WORKER_WATCHDOG_STILL_ALIVE,
                    logging.WARNING,
                    elapsed=round(verdict.elapsed, 3),
                    remaining=round(verdict.remaining, 3),
                    siblings=self.siblings(),
                )
            if now >= next_stale_check and not late:
                next_stale_check = now + settings.check_interval
                table = state.liveness.table
                if state.watch.store_suspect:
                    # The store is failing: loops waiting on it are not wedged, and the
                    # heartbeat (bounded, still judged) isolates the worker (exit 1).
                    table = table.only(JUDGED_WHILE_STORE_FAILS)
                stale = judge_stale_loops(table, now, settings)
                if isinstance(stale, Trip):
                    await self.on_trip(stale)
                    return
            expected = clock.monotonic() + period
            await clock.sleep(period)


class LoopLagMonitor:
    """The event-loop lag detector's daemon thread (real time; see the module docstring)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        state: WatchdogView,
        settings: WatchdogSettings,
    ) -> None:
        self._loop = loop
        self._state = state
        self._settings = settings
        self._stop = threading.Event()
        self._last_beat: float | None = None
        self._thread = threading.Thread(target=self._watch, name="taskq-loop-lag", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _beat(self) -> None:
        self._last_beat = time.monotonic()

    def _watch(self) -> None:
        detector = LoopLagDetector.from_settings(self._settings, started_at=time.monotonic())
        interval = min(self._settings.loop_lag_budget / 4, 1.0)
        while not self._stop.wait(interval):
            try:
                self._loop.call_soon_threadsafe(self._beat)
            except RuntimeError:
                return  # the loop closed
            now = time.monotonic()
            if self._state.liveness.ticked:
                detector = detector.on_liveness_tick(now)
            if self._last_beat is not None:
                detector = detector.beat(self._last_beat)
            detector, verdict = detector.check(now)
            if isinstance(verdict, Trip):
                self._state.metrics.watchdog_tripped(verdict.detector.value)
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                report_trip(verdict, self._loop)
                # os._exit skips the OTel SDK's flush at exit: bounded, the loop is stuck anyway.
                self._state.metrics.flush(1.0)
                os._exit(verdict.exit_code)
