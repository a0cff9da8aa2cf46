"""The threads plain ``def`` actors run in: a pool of daemon threads.

A worker runs up to ``max_concurrency`` sync jobs at once, so it needs that many
threads of its own: the loop's default pool holds only cpu count + 4, and asyncio
itself uses it (``getaddrinfo`` when a connection is opened). The threads are
daemons because a thread cannot be stopped: a sync job the shutdown gave up on
(cancelled, then abandoned, its outcome written) may still be running when the
worker returns, and ``concurrent.futures.ThreadPoolExecutor`` threads would keep
the process from exiting until it ends, which for a hung job is never.

A thread running a job the worker gave up on (its timeout's cleanup grace
passed) is *written off* (:meth:`ActorThreads.write_off`): until it returns,
one more thread may start in its place, so a hung job does not take a slot
from the jobs that follow. At most ``max_workers`` threads are written off at
once (the pool never holds more than twice ``max_workers`` threads); past that,
new jobs wait for a thread as before.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_WorkItem = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class ThreadHooks(Protocol):
    """Per-thread setup and teardown (the THREAD dependency scope, ``di.ThreadScope``)."""

    def adopt_thread(self) -> None:
        """Called first in each new thread: it will call ``close_thread`` itself."""

    def close_thread(self) -> None:
        """Called last in each thread as it stops: tear down its own instances."""


class ActorThreads(Executor):
    """Up to ``max_workers`` daemon threads named ``<prefix>_<n>``, started on demand."""

    def __init__(
        self,
        max_workers: int,
        *,
        thread_name_prefix: str = "taskq-actor",
        hooks: ThreadHooks | None = None,
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self._max_workers = max_workers
        self._prefix = thread_name_prefix
        self._hooks = hooks
        self._busy: set[threading.Thread] = set()
        # Done when a thread has stopped (its hooks' close_thread run), one per thread.
        self._stopped: dict[threading.Thread, Future[None]] = {}
        self._work: queue.SimpleQueue[_WorkItem | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = threading.Semaphore(0)  # one release per thread waiting for work
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._shut = False
        #: Threads still running a job the worker gave up on (see write_off).
        self._written_off = 0

    def __repr__(self) -> str:
        return f"<ActorThreads {self._prefix} threads={len(self._threads)}/{self._max_workers}>"

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot run a job after the actor threads were shut down")
            future: Future[T] = Future()
            self._work.put((future, fn, args, kwargs))
            if (
                not self._idle.acquire(blocking=False)
                and self._live() < self._max_workers + self._written_off
            ):
                thread = threading.Thread(
                    target=self._serve,
                    name=f"{self._prefix}_{next(self._numbers)}",
                    daemon=True,
                )
                self._stopped[thread] = Future()
                thread.start()
                self._threads.append(thread)
            return future

    def write_off(self) -> bool:
        """A thread is running a job the worker gave up on: let another thread start in
        its place until :meth:`written_off_returned`. False (nothing written off) when
        ``max_workers`` threads already are."""
        with self._lock:
            if self._written_off >= self._max_workers:
                return False
            self._written_off += 1
            return True

    def written_off_returned(self) -> None:
        """A written-off job returned: its thread serves jobs again (the pool keeps the
        extra thread, idle, rather than stopping one)."""
        with self._lock:
            self._written_off = max(self._written_off - 1, 0)

    @property
    def written_off(self) -> int:
        """Threads running a job the worker gave up on, each replaceable."""
        return self._written_off

    def _live(self) -> int:
        # Threads started and not stopped (only shutdown stops them).
        return len(self._threads)

    def idle_stopped(self) -> list[Future[None]]:
        """After :meth:`shutdown`: one future per thread that was not running a job, done
        once it has stopped (threads still running a job may never stop)."""
        with self._lock:
            return [self._stopped[t] for t in self._threads if t not in self._busy]

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shut = True
            if cancel_futures:
                while True:
                    try:
                        item = self._work.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        item[0].cancel()
            for _ in self._threads:
                self._work.put(None)  # one stop per thread, after the work queued before it
        if wait:
            for thread in self._threads:
                thread.join()

    def _serve(self) -> None:
        if self._hooks is not None:
            self._hooks.adopt_thread()
        try:
            self._serve_jobs()
        finally:
            if self._hooks is not None:
                self._hooks.close_thread()  # in this thread: its instances were made here
            self._stopped[threading.current_thread()].set_result(None)

    def _serve_jobs(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            with self._lock:
                self._busy.add(threading.current_thread())
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del item, future, fn, args, kwargs  # nothing of a finished job kept while idle
            with self._lock:
                self._busy.discard(threading.current_thread())
            self._idle.release()


__all__ = ["ActorThreads", "ThreadHooks"]
