"""``ActorRef``: a registered actor, what the client enqueues and the worker runs.

It holds the function, its checked options (:mod:`.options`) and its signature
(:mod:`.signature`), and answers for everything that depends on the actor's
types by delegating: payload and result JSON to :mod:`.codec`, the call itself
to :mod:`.invoke`, the job an enqueue writes to :mod:`.enqueue_options`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Generic, TypeVar, Unpack, cast

from pydantic import BaseModel

from taskq.app.actors.codec import PayloadCodec, ResultCodec, refuse_secrets
from taskq.app.actors.enqueue_options import NO_OPTIONS, EnqueueArgs, EnqueueOptions
from taskq.app.actors.invoke import invoke
from taskq.app.actors.options import ActorOptions
from taskq.app.actors.signature import ActorSignature, describe
from taskq.app.context import JobContext
from taskq.app.di import DependencySpec
from taskq.app.scheduling.schedule import CronSchedule
from taskq.domain.actor_config import ActorConfig
from taskq.domain.job import JSON, NewJob
from taskq.domain.limits import ConcurrencyLimit, RateLimit
from taskq.domain.retry import RetryPolicy

P = TypeVar("P", bound=BaseModel)
R = TypeVar("R")


class ActorRef(Generic[P, R]):
    """A registered actor: its function, options and types.

    Immutable; hashed by name (equality is identity). Build one with
    :func:`taskq.actor`. Calling it calls the undecorated function directly,
    which is how actors are unit-tested.
    """

    name: str
    queue: str
    retry: RetryPolicy
    max_concurrent: int | None
    max_pending: int | None
    result_ttl: timedelta | None
    timeout: timedelta | None
    metadata: Mapping[str, JSON]
    rate_limits: tuple[RateLimit, ...]
    reservations: tuple[ConcurrencyLimit, ...]
    payload_type: type[P]
    result_type: Any
    is_async: bool
    wants_context: bool
    dependencies: Mapping[str, DependencySpec]
    fn: Callable[..., Any]
    _signature: ActorSignature
    _payloads: PayloadCodec[P]
    _results: ResultCodec[R]
    __wrapped__: Callable[..., Any]
    __name__: str
    __qualname__: str
    #: The ``@cron`` schedules stacked on this actor (:func:`taskq.app.scheduling.decorator.cron`).
    cron_schedules: tuple[CronSchedule, ...] = ()

    def __init__(
        self, fn: Callable[..., Any], *, signature: ActorSignature, options: ActorOptions
    ) -> None:
        """``options`` checked by :func:`~taskq.app.actors.options.check_actor_options`;
        ``ConfigurationError`` when the payload or result type holds a pydantic secret."""
        results: ResultCodec[R] = ResultCodec(options.name, signature.result_type)
        refuse_secrets(f"@actor {describe(fn)}", signature.payload_type, results)
        fallback_name = repr(fn)
        values: dict[str, Any] = {
            "name": options.name,
            "queue": options.queue,
            "retry": options.retry,
            "max_concurrent": options.max_concurrent,
            "max_pending": options.max_pending,
            "result_ttl": options.result_ttl,
            "timeout": options.timeout,
            "metadata": options.metadata,
            "rate_limits": options.rate_limits,
            "reservations": options.reservations,
            "payload_type": signature.payload_type,
            "result_type": signature.result_type,
            "is_async": signature.is_async,
            "wants_context": signature.context_param is not None,
            "dependencies": MappingProxyType(dict(signature.dependencies)),
            "fn": fn,
            "_signature": signature,
            "_payloads": PayloadCodec(options.name, signature.payload_type),
            "_results": results,
            # functools.update_wrapper would go through the frozen __setattr__.
            "__wrapped__": fn,
            "__name__": getattr(fn, "__name__", fallback_name),
            "__qualname__": getattr(fn, "__qualname__", fallback_name),
            "__module__": getattr(fn, "__module__", None),
            "__doc__": getattr(fn, "__doc__", None),
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)

    # -- identity ---------------------------------------------------------------------

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ActorRef {self.name!r} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ActorRef {self.name!r} is immutable")

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        kind = "async" if self.is_async else "sync"
        return f"<ActorRef {self.name!r} queue={self.queue!r} {kind} {describe(self.fn)}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the undecorated function (no validation, no DI, no thread)."""
        return self.fn(*args, **kwargs)

    def with_cron_schedule(self, schedule: CronSchedule) -> ActorRef[P, R]:
        """A copy of this actor with ``schedule`` added (the ref itself stays immutable)."""
        twin = copy.copy(self)
        object.__setattr__(twin, "cron_schedules", (*self.cron_schedules, schedule))
        return twin

    # -- payloads ---------------------------------------------------------------------

    def validate_payload(self, raw: Mapping[str, Any] | BaseModel) -> P:
        """The payload model for ``raw`` (a dict or a model, keyed as the model is built).

        Raises :class:`PayloadValidationError` with pydantic's message.
        """
        return self._payloads.validate(raw)

    def load_payload(self, raw: Mapping[str, Any]) -> P:
        """The payload model for stored JSON ``raw`` (keyed by field name, as dumped)."""
        return self._payloads.validate(raw, stored=True)

    def dump_payload(self, payload: P | Mapping[str, Any]) -> dict[str, JSON]:
        """The JSON object stored for ``payload`` (a model instance or a dict that validates).

        Dumped through the actor's payload type, by field name. The dump is
        validated again, as the worker will read it, so a payload the worker
        would refuse is refused here, before anything is written.
        """
        return self._payloads.dump(payload)

    def dump_payloads(self, payloads: Sequence[P | Mapping[str, Any]]) -> list[dict[str, JSON]]:
        """:meth:`dump_payload` of each payload, in order, with the same checks; the first
        that fails raises ``PayloadValidationError`` prefixed with ``payload #<index>``."""
        return self._payloads.dump_many(payloads)

    # -- running ----------------------------------------------------------------------

    async def run(
        self,
        payload: P,
        ctx: JobContext[P] | None,
        deps: Mapping[str, object],
        *,
        executor: Executor | None = None,
    ) -> R:
        """Call the function with ``(payload, ctx if wanted, **deps)``.

        A plain ``def`` runs in a thread of ``executor`` (the worker passes its
        own pool), else of the loop's default one (``asyncio.to_thread``), so the
        event loop never blocks; THREAD-scope dependencies are resolved in that
        thread, with the caller's context variables. ``deps`` must hold exactly
        the actor's dependencies; ``ctx`` may be None only for an actor that
        takes none (``wants_context``).
        """
        result = await invoke(
            self.fn, self._signature, payload, ctx, deps, actor=self.name, executor=executor
        )
        return cast(R, result)

    # -- results ----------------------------------------------------------------------

    def dump_result(self, result: R) -> JSON:
        """The JSON stored for ``result``; ``TypeError`` if it is not the declared type,
        ``ValueError`` if no store can keep it (NaN or infinity, a NUL character)."""
        return self._results.dump(result)

    def load_result(self, raw: JSON) -> R:
        """The typed result for stored JSON ``raw``; ``ValueError`` if it does not validate."""
        return self._results.load(raw)

    # -- persistence ------------------------------------------------------------------

    def config(self) -> ActorConfig:
        """The ``actor_config`` row this actor registers (literals seed new rows only)."""
        return ActorConfig(
            actor=self.name,
            queue=self.queue,
            metadata=copy.deepcopy(dict(self.metadata)),
            max_concurrent=self.max_concurrent,
            max_pending=self.max_pending,
            result_ttl=self.result_ttl,
        )

    def new_job(
        self, payload: P | Mapping[str, Any], *, now: datetime, **options: Unpack[EnqueueArgs]
    ) -> NewJob:
        """The job to enqueue for ``payload`` at ``now``, with the enqueue ``options``
        (:class:`~taskq.app.actors.enqueue_options.EnqueueOptions`).

        Validates and dumps the payload first (``PayloadValidationError``),
        then the options (``TypeError``/``ValueError``). The job stores
        ``retry.job_max_attempts`` and, for an indefinite policy, the deadline
        its ``time_budget`` sets (the earlier of it and ``schedule_to_close``);
        ``timeout`` bounds each of its attempts instead of the actor's.
        """
        dumped = self._payloads.dump(payload)
        checked = EnqueueOptions(**options) if options else NO_OPTIONS
        return checked.new_job(
            actor=self.name,
            queue=self.queue,
            payload=dumped,
            retry=self.retry,
            max_pending=self.max_pending,
            now=now,
        )


__all__ = ["ActorRef"]
