"""The supervisor's loop: start children, restart crashes, kill stale ones, pass signals on.

One asyncio loop polls its children every ``TICK`` seconds rather than waiting on each:
with a handful of children the poll costs nothing and keeps every decision (exit,
restart, health, shutdown deadline) in one place and one order.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from taskq.app.workgroup import exit_codes
from taskq.app.workgroup.child import Child, worker_env
from taskq.app.workgroup.config import WorkerSpec, WorkgroupConfig
from taskq.app.workgroup.health import StaleTracker, read_last_seen
from taskq.app.workgroup.restart import BurstLimiter
from taskq.ports.queue_store import WorkerRegistry

TICK = 0.1


def say(message: str) -> None:
    """One line on stderr, where the children's logs go too."""
    print(f"taskq workgroup: {message}", file=sys.stderr, flush=True)


@dataclass(slots=True)
class Slot:
    """One ``[[workers]]`` entry: its current child, its restarts, its final exit code."""

    spec: WorkerSpec
    limiter: BurstLimiter
    child: Child | None = None
    restart_at: float | None = None
    next_check: float = 0.0
    final: int | None = None
    killed_after_grace: bool = False


@dataclass(slots=True)
class _Stop:
    by: signal.Signals | None = None
    kill_at: float = 0.0
    gave_up: bool = False


class Supervisor:
    def __init__(
        self,
        config: WorkgroupConfig,
        *,
        base_env: Mapping[str, str],
        instance: str,
        registry: WorkerRegistry,
        grace: float,
        health_socket: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._base_env = base_env
        self._instance = instance
        self._registry = registry
        self._grace = grace
        self._health_socket = health_socket
        self._clock = clock
        self._slots = [Slot(spec, BurstLimiter(config.restart)) for spec in config.workers]
        self._tracker = StaleTracker()
        self._stop = _Stop()
        self._pending_signals: list[signal.Signals] = []

    async def run(self) -> int:
        """Run until every child is done; the exit code (see ``exit_codes``)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._pending_signals.append, sig)
        try:
            for slot in self._slots:
                self._spawn(slot)
            while any(slot.final is None for slot in self._slots):
                self._take_signals()
                self._reap()
                self._restart_due()
                await self._check_health()
                self._kill_after_grace()
                await asyncio.sleep(TICK)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            for slot in self._slots:  # a bug must not leave children running
                if slot.child is not None:
                    slot.child.send(signal.SIGKILL)
        return self._exit_code()

    def _spawn(self, slot: Slot) -> None:
        slot.child = Child(
            slot.spec, worker_env(slot.spec, self._base_env, self._instance, self._health_socket)
        )
        now = self._clock()
        slot.restart_at = None
        slot.next_check = now + slot.spec.health.check_interval
        self._tracker.started(slot.child.pid, now)
        say(f"started {slot.spec.name} (pid {slot.child.pid})")

    def _take_signals(self) -> None:
        while self._pending_signals:
            sig = self._pending_signals.pop(0)
            if self._stop.by is None:
                self._stop.by = sig
                self._stop.kill_at = self._clock() + self._grace
                say(f"{sig.name}: stopping every child ({self._grace:g}s before SIGKILL)")
            self._stop_children(sig)

    def _stop_children(self, sig: signal.Signals) -> None:
        for slot in self._slots:
            if slot.restart_at is not None:  # a crashed child waiting for its restart
                slot.restart_at = None
                slot.final = slot.final if slot.final is not None else 1
            if slot.child is not None:
                slot.child.send(sig)

    def _reap(self) -> None:
        now = self._clock()
        for slot in self._slots:
            code = slot.child.poll() if slot.child is not None else None
            if code is None or slot.child is None:
                continue
            pid, slot.child = slot.child.pid, None
            self._tracker.forget(pid)
            if self._stop.by is not None or code == 0:
                slot.final = code
                say(f"{slot.spec.name} (pid {pid}) exited {code}")
            elif slot.limiter.allow(now):
                slot.restart_at = now + self._config.restart.delay
                say(
                    f"{slot.spec.name} (pid {pid}) exited {code}; restarting "
                    f"({slot.limiter.recent} of {self._config.restart.max_restarts} "
                    f"in {self._config.restart.window:g}s)"
                )
            else:
                slot.final = code
                say(
                    f"{slot.spec.name} (pid {pid}) exited {code}; giving up: more than "
                    f"{self._config.restart.max_restarts} restarts in "
                    f"{self._config.restart.window:g}s"
                )
                self._give_up()

    def _give_up(self) -> None:
        if self._stop.by is None:
            self._stop.gave_up = True
            self._pending_signals.append(signal.SIGTERM)
            self._take_signals()

    def _restart_due(self) -> None:
        now = self._clock()
        for slot in self._slots:
            if slot.restart_at is not None and slot.restart_at <= now and slot.final is None:
                self._spawn(slot)

    async def _check_health(self) -> None:
        now = self._clock()
        due = [
            s
            for s in self._slots
            if s.child is not None and s.spec.health.enabled and s.next_check <= now
        ]
        if not due or self._stop.by is not None:
            return
        for slot in due:
            slot.next_check = now + slot.spec.health.check_interval
        seen = await self._read(min(s.spec.health.check_interval for s in due))
        if seen is None:
            return
        now = self._clock()
        for slot in due:
            child = slot.child
            if child is None:
                continue
            stale_after = slot.spec.health.stale_after
            if self._tracker.is_stale(child.pid, seen.get(child.pid), now, stale_after):
                say(
                    f"{slot.spec.name} (pid {child.pid}): no heartbeat in {stale_after:g}s; SIGKILL"
                )
                child.send(signal.SIGKILL)

    async def _read(self, within: float) -> dict[int, datetime] | None:
        """The children's heartbeats, or ``None`` when the database cannot say.

        A failed read kills nobody: the supervisor's own connection may be what is
        broken, and killing every healthy child for it would turn a blip into an outage.
        """
        try:
            async with asyncio.timeout(within):
                return await read_last_seen(self._registry, self._instance)
        except Exception as exc:  # any failure means "no reading this time"
            say(f"health check skipped: cannot read workers: {type(exc).__name__}: {exc}")
            return None

    def _kill_after_grace(self) -> None:
        if self._stop.by is None or self._clock() < self._stop.kill_at:
            return
        for slot in self._slots:
            if slot.child is not None and not slot.killed_after_grace:
                slot.killed_after_grace = True
                say(f"{slot.spec.name} (pid {slot.child.pid}) outlived its grace; SIGKILL")
                slot.child.send(signal.SIGKILL)

    def _exit_code(self) -> int:
        if self._stop.gave_up:
            return exit_codes.GAVE_UP
        if any(s.final != 0 or s.killed_after_grace for s in self._slots):
            return exit_codes.UNCLEAN_STOP
        return exit_codes.OK
