"""What an actor declares and an application registers: scopes, specs, factories, errors."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from taskq.domain.errors import TaskQError


class Scope(Enum):
    """How long one instance of a dependency lives (see ``taskq.app.di``)."""

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
        return f"{type_name(self.type)} at {self.scope.name} scope"


class DependencyError(TaskQError):
    """A dependency could not be made: names it (and the actor and parameter needing it,
    where known) and what its factory raised (the ``__cause__``)."""

    def __init__(self, message: str, spec: DependencySpec) -> None:
        super().__init__(message)
        self.spec = spec


def factory_failed(spec: DependencySpec, exc: BaseException, who: str = "") -> DependencyError:
    return DependencyError(
        f"{who}the factory of {spec.describe()} raised {type(exc).__name__}: {exc}", spec
    )


def for_parameter(actor: str, parameter: str) -> str:
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
class Registration:
    spec: DependencySpec
    factory: Factory


def type_name(tp: object) -> str:
    name = getattr(tp, "__qualname__", None)
    return name if isinstance(name, str) and not hasattr(tp, "__args__") else repr(tp)


def is_async_factory(factory: Factory) -> bool:
    """An ``async def``, an async generator, an ``@asynccontextmanager`` function, or a
    class that is only an async context manager."""
    if isinstance(factory, type):
        return hasattr(factory, "__aenter__") and not hasattr(factory, "__enter__")
    unwrapped = inspect.unwrap(factory)
    return inspect.iscoroutinefunction(unwrapped) or inspect.isasyncgenfunction(unwrapped)


def missing_provider(
    actor: str,
    parameter: str,
    spec: DependencySpec,
    registrations: Mapping[tuple[Any, Scope], Registration],
) -> str:
    others = sorted(s.name for (tp, s) in registrations if tp == spec.type and s is not spec.scope)
    hint = f" (it is registered at {', '.join(others)} scope)" if others else ""
    return (
        f"actor {actor!r}, parameter {parameter!r}: no provider registered for "
        f"{spec.describe()}{hint}"
    )
