"""Calling an actor's function with its payload, context and dependencies.

A plain ``def`` runs in a thread of the worker's executor (or the loop's default
one), so the event loop never blocks; THREAD-scope dependencies are resolved in
that thread, with the caller's context variables.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from typing import Any

from taskq.app.actors.signature import ActorSignature
from taskq.app.di import resolve_thread_locals


async def invoke(
    fn: Callable[..., Any],
    signature: ActorSignature,
    payload: object,
    ctx: object | None,
    deps: Mapping[str, object],
    *,
    actor: str,
    executor: Executor | None = None,
) -> Any:
    """Call ``fn`` (the actor ``actor``, read as ``signature``) with
    ``(payload, ctx if wanted, **deps)``; ``TypeError`` when ``ctx`` or ``deps`` do not
    match what it declares."""
    if ctx is None and signature.context_param is not None:
        raise TypeError(f"actor {actor!r} takes a JobContext; none was given")
    if deps or signature.dependencies:  # most actors have none: nothing to check or resolve
        declared = set(signature.dependencies)
        if set(deps) != declared:
            raise TypeError(
                f"actor {actor!r} declares dependencies {sorted(declared)}, got {sorted(deps)}"
            )
    if signature.is_async:
        args, kwargs = _arguments(
            signature, payload, ctx, resolve_thread_locals(deps) if deps else {}
        )
        result = await fn(*args, **kwargs)
    elif executor is None:
        result = await asyncio.to_thread(_call_in_thread, fn, signature, payload, ctx, deps)
    else:
        call = functools.partial(
            contextvars.copy_context().run, _call_in_thread, fn, signature, payload, ctx, deps
        )
        result = await asyncio.get_running_loop().run_in_executor(executor, call)
    if not signature.is_async and inspect.isawaitable(result):
        result = await result  # a sync wrapper around an async function
    return result


def _call_in_thread(
    fn: Callable[..., Any],
    signature: ActorSignature,
    payload: object,
    ctx: object | None,
    deps: Mapping[str, object],
) -> Any:
    args, kwargs = _arguments(signature, payload, ctx, resolve_thread_locals(deps))
    return fn(*args, **kwargs)


def _arguments(
    signature: ActorSignature, payload: object, ctx: object | None, deps: Mapping[str, object]
) -> tuple[list[object], dict[str, object]]:
    args: list[object] = [payload]
    kwargs: dict[str, object] = {}
    for param in signature.plan:
        value = ctx if param.role == "context" else deps[param.name]
        if param.positional_only:
            args.append(value)
        else:
            kwargs[param.name] = value
    return args, kwargs


__all__ = ["invoke"]
