"""The scope containers: PROCESS and LOOP (made at open), THREAD (made per thread).

Instance lifecycles are dependency-injector providers: ``Resource`` for
PROCESS, LOOP and TRANSIENT, ``ThreadLocalSingleton`` for THREAD, held in one
``DynamicContainer`` per long-lived scope. A failing teardown is logged
(``di-teardown-failed``), never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from dependency_injector import containers, providers

from taskq.app.di.spec import DependencySpec, Registration, Scope, factory_failed
from taskq.domain.errors import ConfigurationError

_log = logging.getLogger("taskq.di")


def _log_teardown_failure(spec: DependencySpec, exc: BaseException) -> None:
    _log.error(
        "di-teardown-failed",
        extra={"dependency": spec.describe(), "error": repr(exc)},
        exc_info=exc,
    )


async def init_resource(
    provider: providers.Resource[Any], spec: DependencySpec, who: str = ""
) -> object:
    try:
        product: object = provider.init()
        if inspect.isawaitable(product):
            product = await product
    except Exception as exc:
        raise factory_failed(spec, exc, who) from exc
    return product


async def _shutdown_resource(provider: providers.Resource[Any], spec: DependencySpec) -> None:
    try:
        result = provider.shutdown()
        if inspect.isawaitable(result):
            await result
    except asyncio.CancelledError:
        raise  # the worker gave up on this teardown (the shutdown deadline)
    except BaseException as exc:  # one failed teardown must not skip the others
        # SystemExit or KeyboardInterrupt too: raised in a job's teardown task, asyncio
        # would re-raise it out of the event loop and end the worker.
        _log_teardown_failure(spec, exc)


async def shutdown_all(opened: list[tuple[providers.Resource[Any], DependencySpec]]) -> None:
    """Tear down ``opened`` in reverse creation order; never raises."""
    while opened:
        provider, spec = opened.pop()
        await _shutdown_resource(provider, spec)


class _EagerScope:
    """PROCESS or LOOP: every registered instance created at open, torn down at close."""

    def __init__(self, scope: Scope, registrations: Iterable[Registration]) -> None:
        self.scope = scope
        self.container = containers.DynamicContainer()
        self._registrations = [r for r in registrations if r.spec.scope is scope]
        self._opened: list[tuple[providers.Resource[Any], DependencySpec]] = []
        self._instances: dict[Any, object] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} instances={len(self._instances)}>"

    async def open(self) -> None:
        try:
            for index, registration in enumerate(self._registrations):
                provider: providers.Resource[Any] = providers.Resource(registration.factory)
                self.container.set_provider(f"dependency_{index}", provider)
                self._opened.append((provider, registration.spec))
                instance = await init_resource(provider, registration.spec)
                self._instances[registration.spec.type] = instance
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        self._instances.clear()
        await shutdown_all(self._opened)

    def get(self, dependency_type: Any) -> object:
        try:
            return self._instances[dependency_type]
        except KeyError:
            raise ConfigurationError(
                f"no provider for {DependencySpec(dependency_type, self.scope).describe()}"
            ) from None


class ProcessScope(_EagerScope):
    """The PROCESS scope container: one instance per worker process."""

    def __init__(self, registrations: Iterable[Registration]) -> None:
        super().__init__(Scope.PROCESS, registrations)


class LoopScope(_EagerScope):
    """The LOOP scope container: instances bound to the event loop that opened it."""

    def __init__(self, registrations: Iterable[Registration]) -> None:
        super().__init__(Scope.LOOP, registrations)
        self.loop: asyncio.AbstractEventLoop | None = None

    async def open(self) -> None:
        self.loop = asyncio.get_running_loop()
        await super().open()

    def get(self, dependency_type: Any) -> object:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self.loop:
            raise RuntimeError(
                f"{DependencySpec(dependency_type, Scope.LOOP).describe()} belongs to the "
                "event loop that opened the worker scopes; it cannot be used from another "
                "loop or thread"
            )
        return super().get(dependency_type)


class ThreadScope:
    """The THREAD scope container: one instance per thread, made on first use there.

    A thread that adopted its teardown (the worker's actor threads, through
    :meth:`adopt_thread`) tears down its own instances as it stops
    (:meth:`close_thread`): thread-bound objects such as sqlite3 connections
    can only be closed there. The rest are torn down at :meth:`close`, in the
    closing thread, newest first; an adopted thread still running then (a job
    the shutdown gave up on) keeps its instances, logged ``di-teardown-left``.
    """

    def __init__(self, registrations: Iterable[Registration]) -> None:
        self.container = containers.DynamicContainer()
        self._providers: dict[Any, providers.ThreadLocalSingleton[object]] = {}
        self._exits: dict[threading.Thread, list[tuple[DependencySpec, Callable[[], object]]]] = {}
        self._adopted: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._closed = False
        thread_regs = [r for r in registrations if r.spec.scope is Scope.THREAD]
        for index, registration in enumerate(thread_regs):
            provider: providers.ThreadLocalSingleton[object] = providers.ThreadLocalSingleton(
                self._create, registration
            )
            self.container.set_provider(f"dependency_{index}", provider)
            self._providers[registration.spec.type] = provider

    def __repr__(self) -> str:
        count = sum(len(exits) for exits in self._exits.values())
        return f"<ThreadScope instances={count} closed={self._closed}>"

    def get(self, dependency_type: Any) -> object:
        """This thread's instance, created now if this thread has none yet."""
        if self._closed:
            raise RuntimeError("the THREAD scope is closed (the worker is shutting down)")
        provider = self._providers.get(dependency_type)
        if provider is None:
            raise ConfigurationError(
                f"no provider for {DependencySpec(dependency_type, Scope.THREAD).describe()}"
            )
        return provider()

    def _create(self, registration: Registration) -> object:
        spec, factory = registration.spec, registration.factory
        product: object
        try:
            if inspect.isgeneratorfunction(factory):
                product = contextlib.contextmanager(factory)()
            else:
                product = factory()
            entered = hasattr(product, "__enter__") and hasattr(product, "__exit__")
            manager: Any = product
            instance: object = manager.__enter__() if entered else product
        except Exception as exc:
            raise factory_failed(spec, exc) from exc
        if entered:
            with self._lock:
                self._exits.setdefault(threading.current_thread(), []).append(
                    (spec, lambda: manager.__exit__(None, None, None))
                )
            return instance
        if inspect.iscoroutine(product) or hasattr(product, "__aenter__"):
            if inspect.iscoroutine(product):
                product.close()  # never awaited: close it so no warning leaks
            raise ConfigurationError(
                f"{spec.describe()}: the factory produced an awaitable or an async context "
                "manager; THREAD-scope factories must be synchronous (instances are made in "
                "the thread that runs the actor, which has no event loop)"
            )
        return product

    def adopt_thread(self) -> None:
        """The calling thread will call :meth:`close_thread` itself before it ends."""
        with self._lock:
            self._adopted.add(threading.current_thread())

    def close_thread(self) -> None:
        """Tear down the calling thread's instances now, newest first."""
        current = threading.current_thread()
        with self._lock:
            self._adopted.discard(current)
            exits = self._exits.pop(current, [])
        _run_exits(exits)

    def close(self) -> None:
        current = threading.current_thread()
        with self._lock:
            self._closed = True
            left = {
                t: exits
                for t, exits in self._exits.items()
                if t in self._adopted and t is not current and t.is_alive()
            }
            mine = [e for t, exits in self._exits.items() if t not in left for e in exits]
            self._exits = left
        for thread, exits in left.items():
            _log.warning(
                "di-teardown-left",
                extra={
                    "owner_thread": thread.name,
                    "dependencies": [spec.describe() for spec, _ in exits],
                    "reason": "its thread is still running a job",
                },
            )
        _run_exits(mine)


def _run_exits(exits: list[tuple[DependencySpec, Callable[[], object]]]) -> None:
    for spec, exit_ in reversed(exits):
        try:
            exit_()
        except BaseException as exc:  # as _shutdown_resource: never ends the worker
            _log_teardown_failure(spec, exc)
