"""Actor dependencies: scopes, registration, and the worker's scope chain.

An actor declares what it needs as ``Annotated[T, Scope.X]`` parameters; the
application registers how to make each ``(T, scope)`` on a
:class:`Dependencies`; the worker opens the scope chain once and resolves an
actor's parameters per job::

    worker start ─▶ PROCESS ─▶ THREAD ─▶ LOOP ─┐         (opened in this order)
                                               │ per job: actor_scope(ref)
                                               │   TRANSIENT created, then torn down
    worker exit  ◀─ PROCESS ◀─ THREAD ◀─ LOOP ◀┘         (closed in reverse)

Lifetimes:

- ``PROCESS``: one instance per worker process, created when the chain opens.
- ``THREAD``: one instance per OS thread, created on first use in that thread.
  Sync actors run in worker threads, so they get their thread's instance; an
  async actor gets the event-loop thread's. Factories must be synchronous.
- ``LOOP``: one instance per event loop, created on the loop that opens the
  chain; resolving it from another loop is an error (loop-bound objects such
  as driver connections break there).
- ``TRANSIENT``: a new instance per job, torn down when the job's
  ``actor_scope`` exits, whatever the outcome (return, error, cancellation).

A factory takes no arguments and may return the instance, an awaitable of it,
or a context manager (sync or async), or be a (async) generator function. A
context manager is entered and the value of its ``__enter__``/``__aenter__``
is what actors receive; its exit (or the code after the generator's ``yield``)
is the teardown, run at scope close in reverse creation order. Teardown does
not see the job's exception. A failing teardown is logged
(``di-teardown-failed``) and never raised: it cannot change a job's outcome
nor stop the other teardowns.

Instance lifecycles are dependency-injector providers: ``Resource`` for
PROCESS, LOOP and TRANSIENT, ``ThreadLocalSingleton`` for THREAD, held in one
``DynamicContainer`` per long-lived scope.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from dependency_injector import containers, providers

from taskq.domain.errors import ConfigurationError, TaskQError

_log = logging.getLogger("taskq.di")


class Scope(Enum):
    """How long one instance of a dependency lives (see the module docstring)."""

    PROCESS = "process"
    THREAD = "thread"
    LOOP = "loop"
    TRANSIENT = "transient"


@dataclass(frozen=True, slots=True)
class DependencySpec:
    """One declared dependency: instances of ``type`` at lifetime ``scope``."""

    type: Any
    scope: Scope

    def describe(self) -> str:
        return f"{_type_name(self.type)} at {self.scope.name} scope"


class DependencyError(TaskQError):
    """A dependency could not be made: names it (and the actor and parameter needing it,
    where known) and what its factory raised (the ``__cause__``)."""

    def __init__(self, message: str, spec: DependencySpec) -> None:
        super().__init__(message)
        self.spec = spec


def _factory_failed(spec: DependencySpec, exc: BaseException, who: str = "") -> DependencyError:
    return DependencyError(
        f"{who}the factory of {spec.describe()} raised {type(exc).__name__}: {exc}", spec
    )


def _for_parameter(actor: str, parameter: str) -> str:
    return f"actor {actor!r}, parameter {parameter!r}: "


#: A zero-argument factory: instance, awaitable, context manager or generator.
Factory = Callable[[], Any]


class ActorDependencies(Protocol):
    """What DI needs to know about an actor (``ActorRef`` satisfies it)."""

    @property
    def name(self) -> str: ...

    @property
    def dependencies(self) -> Mapping[str, DependencySpec]: ...


@dataclass(frozen=True, slots=True)
class _Registration:
    spec: DependencySpec
    factory: Factory


def _type_name(tp: object) -> str:
    name = getattr(tp, "__qualname__", None)
    return name if isinstance(name, str) and not hasattr(tp, "__args__") else repr(tp)


def _is_async_factory(factory: Factory) -> bool:
    """An ``async def``, an async generator, an ``@asynccontextmanager`` function, or a
    class that is only an async context manager."""
    if isinstance(factory, type):
        return hasattr(factory, "__aenter__") and not hasattr(factory, "__enter__")
    unwrapped = inspect.unwrap(factory)
    return inspect.iscoroutinefunction(unwrapped) or inspect.isasyncgenfunction(unwrapped)


def _log_teardown_failure(spec: DependencySpec, exc: BaseException) -> None:
    _log.error(
        "di-teardown-failed",
        extra={"dependency": spec.describe(), "error": repr(exc)},
        exc_info=exc,
    )


async def _init_resource(
    provider: providers.Resource[Any], spec: DependencySpec, who: str = ""
) -> object:
    try:
        product: object = provider.init()
        if inspect.isawaitable(product):
            product = await product
    except Exception as exc:
        raise _factory_failed(spec, exc, who) from exc
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


async def _shutdown_all(opened: list[tuple[providers.Resource[Any], DependencySpec]]) -> None:
    """Tear down ``opened`` in reverse creation order; never raises."""
    while opened:
        provider, spec = opened.pop()
        await _shutdown_resource(provider, spec)


class _EagerScope:
    """PROCESS or LOOP: every registered instance created at open, torn down at close."""

    def __init__(self, scope: Scope, registrations: Iterable[_Registration]) -> None:
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
                instance = await _init_resource(provider, registration.spec)
                self._instances[registration.spec.type] = instance
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        self._instances.clear()
        await _shutdown_all(self._opened)

    def get(self, dependency_type: Any) -> object:
        try:
            return self._instances[dependency_type]
        except KeyError:
            raise ConfigurationError(
                f"no provider for {DependencySpec(dependency_type, self.scope).describe()}"
            ) from None


class ProcessScope(_EagerScope):
    """The PROCESS scope container: one instance per worker process."""

    def __init__(self, registrations: Iterable[_Registration]) -> None:
        super().__init__(Scope.PROCESS, registrations)


class LoopScope(_EagerScope):
    """The LOOP scope container: instances bound to the event loop that opened it."""

    def __init__(self, registrations: Iterable[_Registration]) -> None:
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

    def __init__(self, registrations: Iterable[_Registration]) -> None:
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

    def _create(self, registration: _Registration) -> object:
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
            raise _factory_failed(spec, exc) from exc
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


class ThreadLocalRef:
    """A THREAD-scope dependency handed to ``ActorRef.run`` unresolved.

    ``ActorRef.run`` calls :meth:`resolve` in the thread that runs the actor
    function, so a sync actor gets its worker thread's instance.
    """

    __slots__ = ("_scope", "_who", "type")

    def __init__(self, scope: ThreadScope, dependency_type: Any, who: str = "") -> None:
        self._scope = scope
        self.type = dependency_type
        self._who = who  # "actor 'x', parameter 'y': " for the error messages

    def __repr__(self) -> str:
        return f"ThreadLocalRef({_type_name(self.type)})"

    def resolve(self) -> object:
        try:
            return self._scope.get(self.type)
        except DependencyError as exc:
            raise DependencyError(f"{self._who}{exc}", exc.spec) from exc.__cause__
        except (ConfigurationError, RuntimeError) as exc:  # no provider; scope closed
            raise type(exc)(f"{self._who}{exc}") from exc


def resolve_thread_locals(deps: Mapping[str, object]) -> dict[str, object]:
    """``deps`` with every :class:`ThreadLocalRef` replaced by this thread's instance."""
    return {
        name: value.resolve() if isinstance(value, ThreadLocalRef) else value
        for name, value in deps.items()
    }


class WorkerScopes:
    """The open scope chain of one worker (from :meth:`Dependencies.open_worker_scopes`)."""

    def __init__(
        self,
        registrations: Mapping[tuple[Any, Scope], _Registration],
        process: ProcessScope,
        thread: ThreadScope,
        loop: LoopScope,
    ) -> None:
        self._registrations = registrations
        self.process = process
        self.thread = thread
        self.loop = loop
        # Teardowns that outlived a second cancel of their job; kept referenced.
        self._background: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"<WorkerScopes {self.process!r} {self.thread!r} {self.loop!r}>"

    async def finish_teardowns(self) -> None:
        """Wait for TRANSIENT teardowns still running after their job was cancelled twice."""
        while self._background:
            await asyncio.gather(*self._background)

    def get(self, dependency_type: Any, scope: Scope) -> object:
        """The instance of a long-lived dependency (THREAD: the calling thread's)."""
        if scope is Scope.PROCESS:
            return self.process.get(dependency_type)
        if scope is Scope.LOOP:
            return self.loop.get(dependency_type)
        if scope is Scope.THREAD:
            return self.thread.get(dependency_type)
        raise ValueError("TRANSIENT instances exist only inside actor_scope()")

    @contextlib.asynccontextmanager
    async def actor_scope(self, ref: ActorDependencies) -> AsyncIterator[dict[str, object]]:
        """Resolve every dependency of ``ref`` into the kwargs for ``ActorRef.run``.

        TRANSIENT instances are created here (in parameter order) and torn
        down when the block exits, whatever the outcome, even when the job is
        cancelled again while tearing down. THREAD entries are
        :class:`ThreadLocalRef` handles that ``ActorRef.run`` resolves in the
        thread running the actor. A factory error is raised as
        :class:`DependencyError` naming the actor, parameter and dependency
        (after tearing down what was already made).
        """
        transient: list[tuple[providers.Resource[Any], DependencySpec]] = []
        kwargs: dict[str, object] = {}
        try:
            for name, spec in ref.dependencies.items():
                kwargs[name] = await self._resolve(ref, name, spec, transient)
            yield kwargs
        finally:
            if transient:
                teardown = asyncio.create_task(_shutdown_all(transient))
                self._background.add(teardown)
                teardown.add_done_callback(self._background.discard)
                await asyncio.shield(teardown)

    async def _resolve(
        self,
        ref: ActorDependencies,
        name: str,
        spec: DependencySpec,
        transient: list[tuple[providers.Resource[Any], DependencySpec]],
    ) -> object:
        registration = self._registrations.get((spec.type, spec.scope))
        if registration is None:
            raise ConfigurationError(_missing(ref.name, name, spec, self._registrations))
        if spec.scope is Scope.TRANSIENT:
            provider: providers.Resource[Any] = providers.Resource(registration.factory)
            transient.append((provider, spec))
            return await _init_resource(provider, spec, _for_parameter(ref.name, name))
        if spec.scope is Scope.THREAD:
            return ThreadLocalRef(self.thread, spec.type, _for_parameter(ref.name, name))
        return self.get(spec.type, spec.scope)


def _missing(
    actor: str,
    parameter: str,
    spec: DependencySpec,
    registrations: Mapping[tuple[Any, Scope], _Registration],
) -> str:
    others = sorted(s.name for (tp, s) in registrations if tp == spec.type and s is not spec.scope)
    hint = f" (it is registered at {', '.join(others)} scope)" if others else ""
    return (
        f"actor {actor!r}, parameter {parameter!r}: no provider registered for "
        f"{spec.describe()}{hint}"
    )


def build_actor_scope(
    scopes: WorkerScopes, ref: ActorDependencies
) -> contextlib.AbstractAsyncContextManager[dict[str, object]]:
    """``scopes.actor_scope(ref)``: the per-job TRANSIENT scope (the worker guide's name)."""
    return scopes.actor_scope(ref)


class Dependencies:
    """Where an application registers how to make each dependency.

    ``register(T, factory, scope=Scope.X)`` once per ``(T, scope)``;
    ``validate(registry)`` at worker start; then
    ``async with deps.open_worker_scopes() as scopes`` for the worker's life.
    Registrations made after the chain opened apply to the next opening.
    """

    def __init__(self) -> None:
        self._registrations: dict[tuple[Any, Scope], _Registration] = {}

    def __repr__(self) -> str:
        specs = ", ".join(r.spec.describe() for r in self._registrations.values())
        return f"Dependencies({specs})"

    def register(self, dependency_type: Any, factory: Factory, /, *, scope: Scope) -> None:
        """Make ``dependency_type`` at ``scope`` with ``factory`` (see the module docstring).

        Raises :class:`ConfigurationError` for a second registration of the
        same ``(type, scope)``, a non-callable factory, or an async factory at
        THREAD scope.
        """
        if not isinstance(scope, Scope):
            raise ConfigurationError(f"scope must be a taskq Scope member, got {scope!r}")
        if not callable(factory):
            raise ConfigurationError(
                f"the factory for {_type_name(dependency_type)} must be a zero-argument "
                f"callable, got {factory!r}"
            )
        spec = DependencySpec(dependency_type, scope)
        if scope is Scope.THREAD and _is_async_factory(factory):
            raise ConfigurationError(
                f"{spec.describe()}: THREAD-scope factories must be synchronous (instances "
                "are made in the thread that runs the actor, which has no event loop)"
            )
        key = (dependency_type, scope)
        if key in self._registrations:
            raise ConfigurationError(f"{spec.describe()} is already registered")
        self._registrations[key] = _Registration(spec, factory)

    def registered(self) -> tuple[DependencySpec, ...]:
        """Every registered ``(type, scope)``, in registration order."""
        return tuple(r.spec for r in self._registrations.values())

    def is_registered(self, dependency_type: Any, scope: Scope) -> bool:
        return (dependency_type, scope) in self._registrations

    def validate(
        self, registry: Mapping[str, ActorDependencies] | Iterable[ActorDependencies]
    ) -> None:
        """Check that every dependency of every actor has a provider.

        Raises one :class:`ConfigurationError` listing every missing one,
        naming the actor, the parameter and the type, so a worker refuses to
        start instead of failing jobs later.
        """
        refs = registry.values() if isinstance(registry, Mapping) else registry
        problems = [
            _missing(ref.name, name, spec, self._registrations)
            for ref in refs
            for name, spec in ref.dependencies.items()
            if (spec.type, spec.scope) not in self._registrations
        ]
        if problems:
            raise ConfigurationError("unresolvable actor dependencies:\n  " + "\n  ".join(problems))

    @contextlib.asynccontextmanager
    async def open_worker_scopes(self) -> AsyncIterator[WorkerScopes]:
        """Open PROCESS, THREAD and LOOP in that order; close them in reverse on exit.

        On exit, TRANSIENT teardowns still running are awaited before LOOP closes.

        PROCESS and LOOP instances are all created here, so a broken factory
        stops the worker at start (instances already made are torn down).
        """
        registrations = dict(self._registrations)
        async with contextlib.AsyncExitStack() as stack:
            process = ProcessScope(registrations.values())
            await process.open()
            stack.push_async_callback(process.close)
            thread = ThreadScope(registrations.values())
            stack.callback(thread.close)
            loop = LoopScope(registrations.values())
            await loop.open()
            stack.push_async_callback(loop.close)
            scopes = WorkerScopes(registrations, process, thread, loop)
            # Job teardowns may still use LOOP/PROCESS instances: they end first.
            stack.push_async_callback(scopes.finish_teardowns)
            yield scopes


__all__ = [
    "ActorDependencies",
    "Dependencies",
    "DependencyError",
    "DependencySpec",
    "Factory",
    "LoopScope",
    "ProcessScope",
    "Scope",
    "ThreadLocalRef",
    "ThreadScope",
    "WorkerScopes",
    "build_actor_scope",
    "resolve_thread_locals",
]
