"""What the runtime needs from an actor and from the DI scopes, as protocols.

``taskq.app.actors.ActorRef`` and ``taskq.app.di.Dependencies`` satisfy them;
typing the runtime against these small shapes keeps it to the members it
really uses (and lets tests hand it simple stand-ins).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any, Protocol

from taskq.domain.actor_config import ActorConfig
from taskq.domain.job import JSON
from taskq.domain.limits import ConcurrencyLimit, RateLimit
from taskq.domain.retry import RetryPolicy


class ActorLike(Protocol):
    """The parts of an ``ActorRef`` the worker dispatches through."""

    @property
    def name(self) -> str: ...

    @property
    def queue(self) -> str: ...

    @property
    def retry(self) -> RetryPolicy: ...

    @property
    def result_ttl(self) -> timedelta | None: ...

    @property
    def rate_limits(self) -> Sequence[RateLimit]: ...

    @property
    def reservations(self) -> Sequence[ConcurrencyLimit]: ...

    def load_payload(self, raw: Mapping[str, Any], /) -> Any: ...

    async def run(
        self,
        payload: Any,
        ctx: Any,
        deps: Mapping[str, object],
        /,
        *,
        executor: Executor | None = None,
    ) -> Any: ...

    def dump_result(self, result: Any, /) -> JSON: ...

    def config(self) -> ActorConfig: ...


class ActorScopes(Protocol):
    """Open worker scopes: resolves one actor's dependencies per job (TRANSIENT scope)."""

    def actor_scope(self, ref: Any, /) -> AbstractAsyncContextManager[Mapping[str, object]]: ...


class DependenciesLike(Protocol):
    """Where the application registered its providers (``taskq.app.di.Dependencies``)."""

    def validate(self, registry: Mapping[str, Any], /) -> None: ...

    def open_worker_scopes(self) -> AbstractAsyncContextManager[ActorScopes]: ...


Registry = Mapping[str, ActorLike]
