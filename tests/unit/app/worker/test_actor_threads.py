"""ActorThreads: a bounded pool of daemon threads for sync actors."""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError

import pytest

from taskq.app.worker.actor_threads import ActorThreads


def test_results_and_errors_come_back_through_the_future() -> None:
    pool = ActorThreads(2, thread_name_prefix="t")
    try:
        assert pool.submit(lambda a, b: a + b, 2, b=3).result(timeout=5) == 5
        failing = pool.submit(int, "not a number")
        with pytest.raises(ValueError, match="not a number"):
            failing.result(timeout=5)
    finally:
        pool.shutdown()


def test_at_most_max_workers_daemon_threads_run_at_once() -> None:
    """Six jobs on three threads: three run together (a barrier of three passes), no
    fourth thread is made, every thread is a named daemon, and the queued jobs run
    when threads free up."""
    pool = ActorThreads(3, thread_name_prefix="actor")
    meeting = threading.Barrier(3, timeout=5)
    seen: list[threading.Thread] = []

    def job() -> str:
        seen.append(threading.current_thread())
        meeting.wait()
        return threading.current_thread().name

    try:
        futures = [pool.submit(job) for _ in range(6)]
        names = {future.result(timeout=10) for future in futures}
    finally:
        pool.shutdown()
    assert names == {"actor_0", "actor_1", "actor_2"}
    assert all(thread.daemon for thread in seen)
    assert not any(thread.is_alive() for thread in seen)


def test_shutdown_cancels_queued_jobs_and_refuses_new_ones() -> None:
    """With cancel_futures, a job still queued behind a busy thread is cancelled; the
    running one finishes; nothing more is accepted."""
    pool = ActorThreads(1)
    release = threading.Event()
    running = pool.submit(release.wait, 5)
    queued = pool.submit(lambda: "never")
    pool.shutdown(wait=False, cancel_futures=True)
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: None)
    release.set()
    assert running.result(timeout=5) is True
    with pytest.raises(CancelledError):
        queued.result(timeout=5)


def test_a_thread_stuck_in_a_job_does_not_hold_shutdown_without_wait() -> None:
    """shutdown(wait=False) returns while a job still runs; the thread is a daemon, so
    it does not keep the process alive either."""
    pool = ActorThreads(1)
    stuck = threading.Event()
    threads: list[threading.Thread] = []

    def wait_stuck() -> None:
        threads.append(threading.current_thread())
        stuck.wait()

    started = pool.submit(wait_stuck)
    pool.shutdown(wait=False)
    assert not started.done()
    stuck.set()
    started.result(timeout=5)
    assert threads[0].daemon


def test_max_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        ActorThreads(0)
