"""ExitGuard: ends the process after a grace unless disarmed first."""

from __future__ import annotations

import threading
import time

from taskq.app.worker.exit_guard import ExitGuard, holding_threads


def test_an_armed_guard_ends_the_process_with_the_code_after_its_grace() -> None:
    exits: list[int] = []
    done = threading.Event()

    def hard_exit(code: int) -> None:
        exits.append(code)
        done.set()

    guard = ExitGuard(within=0.05, hard_exit=hard_exit)
    guard.arm(3)
    assert done.wait(5)
    assert exits == [3]


def test_a_disarmed_guard_does_nothing() -> None:
    exits: list[int] = []
    guard = ExitGuard(within=0.05, hard_exit=exits.append)
    guard.arm(0)
    guard.disarm()
    time.sleep(0.2)
    assert exits == []


def test_holding_threads_are_the_live_non_daemon_ones_but_this_one() -> None:
    release = threading.Event()
    holder = threading.Thread(target=release.wait, name="holder")
    daemon = threading.Thread(target=release.wait, name="daemon", daemon=True)
    holder.start()
    daemon.start()
    try:
        names = {t.name for t in holding_threads()}
        assert "holder" in names
        assert "daemon" not in names
        assert threading.current_thread().name not in names
    finally:
        release.set()
        holder.join()
        daemon.join()
    assert "holder" not in {t.name for t in holding_threads()}
