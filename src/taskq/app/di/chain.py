"""The open scope chain of one worker, and each job's actor scope."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from dependency_injector import providers

from taskq.app.di.scopes import LoopScope, ProcessScope, ThreadScope, init_resource, shutdown_all
from taskq.app.di.spec import (
    ActorDependencies,
    DependencyError,
    DependencySpec,
    Registration,
    Scope,
    for_parameter,
    missing_provider,
    type_name,
)
from taskq.domain.errors import ConfigurationError


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
        return f"ThreadLocalRef({type_name(self.type)})"

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
        registrations: Mapping[tuple[Any, Scope], Registration],
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
                teardown = asyncio.create_task(shutdown_all(transient))
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
            raise ConfigurationError(missing_provider(ref.name, name, spec, self._registrations))
        if spec.scope is Scope.TRANSIENT:
            provider: providers.Resource[Any] = providers.Resource(registration.factory)
            transient.append((provider, spec))
            return await init_resource(provider, spec, for_parameter(ref.name, name))
        if spec.scope is Scope.THREAD:
            return ThreadLocalRef(self.thread, spec.type, for_parameter(ref.name, name))
        return self.get(spec.type, spec.scope)


def build_actor_scope(
    scopes: WorkerScopes, ref: ActorDependencies
) -> contextlib.AbstractAsyncContextManager[dict[str, object]]:
    """``scopes.actor_scope(ref)``: the per-job TRANSIENT scope (the worker guide's name)."""
    return scopes.actor_scope(ref)
