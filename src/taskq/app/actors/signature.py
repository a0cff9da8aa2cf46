"""Reading and checking an actor function's signature, once, at decoration time.

The rules (each violation is an ``ActorSignatureError`` naming the function):

- a function (``def`` or ``async def``), not a generator, class or other callable;
- the first parameter is the payload, annotated with a pydantic ``BaseModel``
  subclass, and can be passed positionally;
- at most one parameter annotated ``JobContext[Payload]`` (any name);
- every other parameter is ``Annotated[T, Scope.X]`` with exactly one ``Scope``;
- no ``*args`` / ``**kwargs``;
- the return annotation is something pydantic can validate (``-> None`` for no
  result; a missing one means ``Any``).

Annotations are resolved with ``typing.get_type_hints`` (modules use
``from __future__ import annotations``), so every name they use must exist
when the decorator runs.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, TypeAdapter

from taskq.app.context import JobContext
from taskq.app.di import DependencySpec, Scope
from taskq.domain.errors import ActorSignatureError

ParamRole = Literal["context", "dependency"]


@dataclass(frozen=True, slots=True)
class ParamPlan:
    """How an actor is called with one parameter after the payload (see :mod:`.invoke`)."""

    name: str
    role: ParamRole
    positional_only: bool


@dataclass(frozen=True, slots=True)
class ActorSignature:
    """What an actor function asks for and returns."""

    payload_type: type[BaseModel]
    result_type: Any  # None for ``-> None``
    context_param: str | None
    dependencies: Mapping[str, DependencySpec]
    plan: tuple[ParamPlan, ...]
    is_async: bool


def describe(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}.{qualname}"


def _fail(fn: Callable[..., Any], problem: str) -> ActorSignatureError:
    return ActorSignatureError(f"@actor {describe(fn)}: {problem}")


def _is_context(annotation: object) -> bool:
    return annotation is JobContext or get_origin(annotation) is JobContext


def _hints(fn: Callable[..., Any], localns: Mapping[str, Any] | None) -> dict[str, Any]:
    try:
        return typing.get_type_hints(
            fn, localns=dict(localns) if localns is not None else None, include_extras=True
        )
    except NameError as exc:
        raise _fail(
            fn,
            f"cannot resolve an annotation ({exc}); every name an actor's annotations use "
            "must be defined before the decorator runs",
        ) from exc
    except Exception as exc:  # malformed annotations: say which function
        raise _fail(fn, f"cannot evaluate its annotations: {exc}") from exc


def _payload_type(
    fn: Callable[..., Any], params: list[inspect.Parameter], hints: Mapping[str, Any]
) -> type[BaseModel]:
    if not params:
        raise _fail(
            fn,
            "it takes no parameters; the first parameter must be the payload, annotated "
            "with a pydantic BaseModel subclass",
        )
    first = params[0]
    if first.kind is inspect.Parameter.KEYWORD_ONLY:
        raise _fail(fn, f"the payload parameter {first.name!r} must not be keyword-only")
    annotation = hints.get(first.name)
    if annotation is None:
        raise _fail(
            fn,
            f"the first parameter {first.name!r} has no annotation; annotate it with a "
            "pydantic BaseModel subclass (the payload model)",
        )
    if not (
        isinstance(annotation, type)
        and issubclass(annotation, BaseModel)
        and annotation is not BaseModel
    ):
        raise _fail(
            fn,
            f"the first parameter {first.name!r} must be annotated with a pydantic BaseModel "
            f"subclass (the payload model), got {annotation!r}",
        )
    return annotation


def _context_matches(annotation: object, payload_type: type[BaseModel]) -> bool:
    args = get_args(annotation)
    return not args or args[0] is payload_type or args[0] is Any


def _dependency(
    fn: Callable[..., Any], param: inspect.Parameter, annotation: object
) -> DependencySpec:
    if get_origin(annotation) is not Annotated:
        raise _fail(
            fn,
            f"parameter {param.name!r} must be annotated JobContext[Payload] or "
            f"Annotated[T, Scope.X], got {annotation!r}",
        )
    scopes = [m for m in getattr(annotation, "__metadata__", ()) if isinstance(m, Scope)]
    if len(scopes) != 1:
        raise _fail(
            fn,
            f"parameter {param.name!r} must carry exactly one Scope marker "
            f"(Annotated[T, Scope.X]), found {len(scopes)}",
        )
    return DependencySpec(get_args(annotation)[0], scopes[0])


def _result_type(fn: Callable[..., Any], hints: Mapping[str, Any]) -> Any:
    if "return" not in hints:
        return Any
    annotation = hints["return"]
    if annotation is None or annotation is type(None):
        return None
    try:
        TypeAdapter(annotation)
    except Exception as exc:
        raise _fail(
            fn, f"its return type {annotation!r} is not something pydantic can validate: {exc}"
        ) from exc
    return annotation


def inspect_actor(
    fn: Callable[..., Any], *, localns: Mapping[str, Any] | None = None
) -> ActorSignature:
    """Check ``fn`` against the rules in the module docstring and describe it.

    ``localns`` resolves names of an actor defined inside a function.
    """
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise ActorSignatureError(
            f"@actor needs a function (def or async def), got {type(fn).__name__} {fn!r}"
        )
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise _fail(fn, "a generator function cannot be an actor; return the result instead")
    hints = _hints(fn, localns)
    params = list(inspect.signature(fn).parameters.values())
    for param in params:
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            star = "*" if param.kind is inspect.Parameter.VAR_POSITIONAL else "**"
            raise _fail(fn, f"{star}{param.name} is not supported: declare each parameter")
    payload_type = _payload_type(fn, params, hints)
    context_param: str | None = None
    dependencies: dict[str, DependencySpec] = {}
    plan: list[ParamPlan] = []
    for param in params[1:]:
        if param.name not in hints:
            raise _fail(
                fn,
                f"parameter {param.name!r} has no annotation; annotate it JobContext[Payload] "
                "or Annotated[T, Scope.X]",
            )
        annotation = hints[param.name]
        positional_only = param.kind is inspect.Parameter.POSITIONAL_ONLY
        if _is_context(annotation):
            if context_param is not None:
                raise _fail(
                    fn, f"parameters {context_param!r} and {param.name!r} both ask for JobContext"
                )
            if not _context_matches(annotation, payload_type):
                raise _fail(
                    fn,
                    f"parameter {param.name!r} is {annotation!r} but the payload model is "
                    f"{payload_type.__qualname__}; use JobContext[{payload_type.__qualname__}]",
                )
            context_param = param.name
            plan.append(ParamPlan(param.name, "context", positional_only))
        else:
            dependencies[param.name] = _dependency(fn, param, annotation)
            plan.append(ParamPlan(param.name, "dependency", positional_only))
    return ActorSignature(
        payload_type=payload_type,
        result_type=_result_type(fn, hints),
        context_param=context_param,
        dependencies=dependencies,
        plan=tuple(plan),
        is_async=inspect.iscoroutinefunction(fn),
    )


__all__ = ["ActorSignature", "ParamPlan", "describe", "inspect_actor"]
