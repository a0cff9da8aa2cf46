"""``Dependencies``: where an application registers its providers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from taskq.app.di.chain import WorkerScopes
from taskq.app.di.scopes import LoopScope, ProcessScope, ThreadScope
from taskq.app.di.spec import (
    ActorDependencies,
    DependencySpec,
    Factory,
    Registration,
    Scope,
    is_async_factory,
    missing_provider,
    type_name,
)
from taskq.domain.errors import ConfigurationError


class Dependencies:
    """Where an application registers how to make each dependency.

    ``register(T, factory, scope=Scope.X)`` once per ``(T, scope)``;
    ``validate(registry)`` at worker start; then
    ``async with deps.open_worker_scopes() as scopes`` for the worker's life.
    Registrations made after the chain opened apply to the next opening.
    """

    def __init__(self) -> None:
        self._registrations: dict[tuple[Any, Scope], Registration] = {}

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
                f"the factory for {type_name(dependency_type)} must be a zero-argument "
                f"callable, got {factory!r}"
            )
        spec = DependencySpec(dependency_type, scope)
        if scope is Scope.THREAD and is_async_factory(factory):
            raise ConfigurationError(
                f"{spec.describe()}: THREAD-scope factories must be synchronous (instances "
                "are made in the thread that runs the actor, which has no event loop)"
            )
        key = (dependency_type, scope)
        if key in self._registrations:
            raise ConfigurationError(f"{spec.describe()} is already registered")
        self._registrations[key] = Registration(spec, factory)

    def registered(self) -> tuple[DependencySpec, ...]:
        """Every registered ``(type, scope)``, in registration order."""
        return tuple(r.spec for r in self._registrations.values())

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
            missing_provider(ref.name, name, spec, self._registrations)
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


__all__ = ["Dependencies"]
