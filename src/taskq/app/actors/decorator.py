"""``@actor``: turn a function into an :class:`~taskq.app.actors.ref.ActorRef`.

::

    @actor(queue="email", retry=RetryPolicy(max_attempts=5))
    async def send_email(payload: Email, ctx: JobContext[Email],
                         smtp: Annotated[Smtp, Scope.PROCESS]) -> Receipt: ...

The signature (:mod:`.signature`) and the options (:mod:`.options`) are
checked when the decorator runs, so a bad actor fails at import, not in the
middle of a job.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import timedelta
from typing import Any, Concatenate, Protocol, TypeVar, overload

from pydantic import BaseModel

from taskq.app.actors.options import check_actor_options
from taskq.app.actors.ref import ActorRef
from taskq.app.actors.signature import describe, inspect_actor
from taskq.domain.errors import ConfigurationError
from taskq.domain.job import DEFAULT_QUEUE, JSON
from taskq.domain.limits import ConcurrencyLimit, RateLimit
from taskq.domain.retry import RetryPolicy

P = TypeVar("P", bound=BaseModel)
R = TypeVar("R")


class ActorDecorator(Protocol):
    """What ``actor(...)`` with options returns."""

    @overload
    def __call__(
        self, fn: Callable[Concatenate[P, ...], Coroutine[Any, Any, R]], /
    ) -> ActorRef[P, R]: ...

    @overload
    def __call__(self, fn: Callable[Concatenate[P, ...], R], /) -> ActorRef[P, R]: ...


def _caller_locals(depth: int) -> Mapping[str, Any] | None:
    # Lets an actor defined inside a function use that function's local names
    # in its annotations; at module level these are just the module globals.
    try:
        return sys._getframe(depth + 1).f_locals
    except ValueError:
        return None


@overload
def actor(fn: Callable[Concatenate[P, ...], Coroutine[Any, Any, R]], /) -> ActorRef[P, R]: ...


@overload
def actor(fn: Callable[Concatenate[P, ...], R], /) -> ActorRef[P, R]: ...


@overload
def actor(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    queue: str = DEFAULT_QUEUE,
    retry: RetryPolicy | None = None,
    max_concurrent: int | None = None,
    max_pending: int | None = None,
    result_ttl: timedelta | None = None,
    timeout: timedelta | None = None,
    metadata: Mapping[str, JSON] | None = None,
    rate_limits: Sequence[RateLimit] | None = None,
    reservations: Sequence[ConcurrencyLimit] | None = None,
) -> ActorDecorator: ...


def actor(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    queue: str = DEFAULT_QUEUE,
    retry: RetryPolicy | None = None,
    max_concurrent: int | None = None,
    max_pending: int | None = None,
    result_ttl: timedelta | None = None,
    timeout: timedelta | None = None,
    metadata: Mapping[str, JSON] | None = None,
    rate_limits: Sequence[RateLimit] | None = None,
    reservations: Sequence[ConcurrencyLimit] | None = None,
) -> Any:
    """Declare an actor; bare (``@actor``) or with options (``@actor(queue=...)``).

    ``name`` defaults to the function's name. ``max_concurrent``,
    ``max_pending`` and ``result_ttl`` only seed the stored ``actor_config``
    row the first time it is created: the stored values win afterwards.
    ``queue`` and ``metadata`` are structural and checked for drift at worker
    start. ``rate_limits`` (:class:`RateLimit`) and ``reservations``
    (:class:`ConcurrencyLimit`) are checked by the worker before each
    invocation; a job denied one is snoozed (see ``docs/actors-and-client.md``).
    ``timeout`` bounds each attempt (an enqueue's ``timeout`` overrides it): at
    the bound the job's ``cancel_event`` is set, then its task cancelled, and
    the attempt fails with ``AttemptTimeout`` (its retry policy decides what
    follows).
    Raises ``ActorSignatureError`` for a bad signature and
    ``ConfigurationError`` for a bad option.
    """

    def decorate(func: Callable[..., Any], localns: Mapping[str, Any] | None) -> ActorRef[Any, Any]:
        if isinstance(func, ActorRef):
            raise ConfigurationError(f"{func!r} is already an actor")
        signature = inspect_actor(func, localns=localns)
        options = check_actor_options(
            f"@actor {describe(func)}",
            name=name if name is not None else func.__name__,
            queue=queue,
            retry=retry,
            max_concurrent=max_concurrent,
            max_pending=max_pending,
            result_ttl=result_ttl,
            timeout=timeout,
            metadata=metadata,
            rate_limits=rate_limits,
            reservations=reservations,
            payload_type=signature.payload_type,
        )
        return ActorRef(func, signature=signature, options=options)

    if fn is not None:
        return decorate(fn, _caller_locals(1))

    def with_options(func: Callable[..., Any]) -> ActorRef[Any, Any]:
        return decorate(func, _caller_locals(1))

    return with_options


__all__ = ["ActorDecorator", "actor"]
