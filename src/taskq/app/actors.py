"""``@actor``: turn a function into an :class:`ActorRef` the worker can run.

::

    @actor(queue="email", retry=RetryPolicy(max_attempts=5))
    async def send_email(payload: Email, ctx: JobContext[Email],
                         smtp: Annotated[Smtp, Scope.PROCESS]) -> Receipt: ...

The signature is checked when the decorator runs (see
:mod:`taskq.app.actor_signature`), so a bad actor fails at import, not in the
middle of a job. An ``ActorRef`` owns everything that depends on the actor's
types: payload validation and JSON dumps, result dumps and loads, the job it
enqueues, and calling the function (a plain ``def`` runs in a worker thread).

A registry is a ``Mapping[str, ActorRef]`` or a list/tuple of them
(:func:`registry_from`); :func:`load_registry` reads one from ``module:attr``.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import importlib
import inspect
import math
import os
import sys
import traceback
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Concatenate, Generic, Protocol, TypeVar, cast, overload

import pydantic_core
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, SchemaSerializer

from taskq.app.actor_json import dump_problem, find_secret, json_serializer
from taskq.app.actor_limits import check_actor_limits
from taskq.app.actor_signature import ActorSignature, describe, inspect_actor
from taskq.app.context import JobContext
from taskq.app.di import DependencySpec, resolve_thread_locals
from taskq.app.scheduling.schedule import CronSchedule
from taskq.app.unstorable import find_unstorable
from taskq.domain.actor_config import ActorConfig
from taskq.domain.errors import ConfigurationError, PayloadValidationError, RegistryError
from taskq.domain.job import DEFAULT_QUEUE, JSON, NewJob, build_new_job
from taskq.domain.limits import ConcurrencyLimit, RateLimit
from taskq.domain.retry import RetryPolicy, deadline_at_enqueue
from taskq.domain.storable import (
    INT32_MAX,
    MAX_NAME_LENGTH,
    MAX_RESULT_TTL,
    check_json_text,
    text_problem,
    timeout_problem,
)

P = TypeVar("P", bound=BaseModel)
R = TypeVar("R")


def json_copy(value: object, where: str) -> JSON:
    """A deep copy of ``value`` made of JSON types only; ``ValueError`` naming ``where`` if not."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}, which JSON cannot hold")
        return value
    if isinstance(value, Mapping):
        copied: dict[str, JSON] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-string key {key!r}")
            copied[key] = json_copy(item, f"{where}[{key!r}]")
        return copied
    if isinstance(value, list | tuple):
        return [json_copy(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise ValueError(f"{where} holds a {type(value).__name__}, which is not JSON")


def _check_name(value: object, what: str, where: str) -> str:
    if not isinstance(value, str) or not value or value.strip() != value:
        raise ConfigurationError(
            f"{where}: {what} must be a non-empty string without surrounding spaces, got {value!r}"
        )
    if len(value) > MAX_NAME_LENGTH:
        raise ConfigurationError(
            f"{where}: {what} is {len(value):,} characters; at most {MAX_NAME_LENGTH} fit a "
            f"store's index, got {value[:40]!r}…"
        )
    problem = text_problem(value)
    if problem is not None:
        raise ConfigurationError(f"{where}: {what} {problem}, which no store can keep: {value!r}")
    return value


def _check_positive(value: object, what: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= INT32_MAX:
        raise ConfigurationError(
            f"{where}: {what} must be an int in [1, {INT32_MAX}] (what a store's integer "
            f"column holds) or None, got {value!r}"
        )
    return value


def _validated_as_given(payload: object, dumped: dict[str, JSON]) -> bool:
    """True when ``dumped``, the JSON dump of ``payload``, needs no validation of its own:
    it is a plain dict equal to it, and so validates as it just did."""
    return type(payload) is dict and dumped == payload


def _refuse_secrets(where: str, **schemas: object) -> None:
    """``ConfigurationError`` for a pydantic secret in the payload or result type: pydantic
    writes it to JSON as asterisks, so the job would keep and deliver those, not the secret."""
    for what, schema in schemas.items():
        path = find_secret(schema)
        if path is not None:
            raise ConfigurationError(
                f"{where}: the {what} holds a pydantic secret at {path!r}, which JSON keeps "
                "only as '**********': pass a reference to the secret (its name in your vault or "
                "settings) and read it in the actor, or declare the field str to store it "
                "in clear in the jobs table"
            )


def _tags(tags: object) -> tuple[str, ...]:
    """``tags`` as a tuple, read once (a generator can be read only once)."""
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise TypeError(f"tags must be an iterable of strings, got {tags!r}")
    materialized = tuple(tags)
    if not all(isinstance(t, str) for t in materialized):
        raise TypeError(f"tags must be an iterable of strings, got {materialized!r}")
    return materialized


def _check_texts(**options: object) -> None:
    for what, value in options.items():
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{what} must be a str or None, got {type(value).__name__} {value!r}")


def _refuse_unrunnable(
    scheduled_at: datetime, deadline: datetime, schedule_to_close: datetime | None
) -> None:
    """A job whose deadline is not after its scheduled time could never start."""
    source = (
        "schedule_to_close"
        if deadline == schedule_to_close
        else "the deadline set by the actor's retry time_budget"
    )
    raise ValueError(
        f"{source} ({deadline.isoformat()}) is not after scheduled_at "
        f"({scheduled_at.isoformat()}): the job could never start"
    )


def _check_aware(value: object, what: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        hint = (
            " (a delay is now + delay, now an aware datetime)"
            if isinstance(value, timedelta)
            else ""
        )
        raise TypeError(
            f"{what} must be a timezone-aware datetime{hint}, got {type(value).__name__} {value!r}"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got {value!r}")
    return value


class ActorRef(Generic[P, R]):
    """A registered actor: its function, options and types.

    Immutable; hashed by name (equality is identity). Build one with
    :func:`actor`. Calling it calls the undecorated function directly, which is
    how actors are unit-tested.
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
    _result_adapter: TypeAdapter[Any]
    _result_serializer: SchemaSerializer
    #: Declared to return nothing: a ``None`` result needs no adapter.
    _returns_none: bool
    __wrapped__: Callable[..., Any]
    __name__: str
    __qualname__: str
    #: The ``@cron`` schedules stacked on this actor (:func:`taskq.app.scheduling.decorator.cron`).
    cron_schedules: tuple[CronSchedule, ...] = ()

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        signature: ActorSignature,
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
    ) -> None:
        where = f"@actor {describe(fn)}"
        if timeout is not None:
            problem = timeout_problem(timeout)
            if problem is not None:
                raise ConfigurationError(f"{where}: timeout {problem}")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"{where}: retry must be a RetryPolicy, got {retry!r}")
        if result_ttl is not None and (
            not isinstance(result_ttl, timedelta) or result_ttl <= timedelta(0)
        ):
            raise ConfigurationError(
                f"{where}: result_ttl must be a positive timedelta or None, got {result_ttl!r}"
            )
        if result_ttl is not None and result_ttl > MAX_RESULT_TTL:
            raise ConfigurationError(
                f"{where}: result_ttl is at most {MAX_RESULT_TTL.days:,} days (about 1,000 "
                f"years, so its expiry stays a time every store holds), got {result_ttl!r}; "
                "result_ttl=None keeps a result until its job is pruned"
            )
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ConfigurationError(
                f"{where}: metadata must be a mapping of str to JSON values, got {metadata!r}"
            )
        try:
            frozen_metadata = json_copy(dict(metadata or {}), "metadata")
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(f"{where}: {exc}") from exc
        unstorable = find_unstorable(frozen_metadata, "metadata")
        if unstorable is not None:
            raise ConfigurationError(f"{where}: {unstorable}, which no store can keep")
        result_adapter = TypeAdapter(
            signature.result_type if signature.result_type is not None else type(None)
        )
        payload_type = signature.payload_type
        _refuse_secrets(
            where,
            payload=payload_type.__pydantic_core_schema__
            if payload_type.__pydantic_complete__
            else None,
            result=result_adapter.core_schema,
        )
        limits = check_actor_limits(
            rate_limits, reservations, payload_type=signature.payload_type, where=where
        )
        fallback_name = repr(fn)
        values: dict[str, Any] = {
            "name": _check_name(name if name is not None else fn.__name__, "name", where),
            "queue": _check_name(queue, "queue", where),
            "retry": retry if retry is not None else RetryPolicy(),
            "max_concurrent": _check_positive(max_concurrent, "max_concurrent", where),
            "max_pending": _check_positive(max_pending, "max_pending", where),
            "result_ttl": result_ttl,
            "timeout": timeout,
            "metadata": MappingProxyType(frozen_metadata),
            "rate_limits": limits[0],
            "reservations": limits[1],
            "payload_type": signature.payload_type,
            "result_type": signature.result_type,
            "is_async": signature.is_async,
            "wants_context": signature.context_param is not None,
            "dependencies": MappingProxyType(dict(signature.dependencies)),
            "fn": fn,
            "_signature": signature,
            "_result_adapter": result_adapter,
            "_result_serializer": json_serializer(result_adapter.core_schema),
            "_returns_none": signature.result_type in (None, type(None)),
            # functools.update_wrapper would go through the frozen __setattr__.
            "__wrapped__": fn,
            "__name__": getattr(fn, "__name__", fallback_name),
            "__qualname__": getattr(fn, "__qualname__", fallback_name),
            "__module__": getattr(fn, "__module__", None),
            "__doc__": getattr(fn, "__doc__", None),
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)

    @functools.cached_property
    def _payload_serializer(self) -> SchemaSerializer:
        # Built on first use: the payload model may be completed after the decorator ran.
        return json_serializer(self.payload_type.__pydantic_core_schema__)

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
        return self._validate_payload(raw, stored=False)

    def load_payload(self, raw: Mapping[str, Any]) -> P:
        """The payload model for stored JSON ``raw`` (keyed by field name, as dumped)."""
        return self._validate_payload(raw, stored=True)

    def _validate_payload(self, raw: object, *, stored: bool) -> P:
        try:
            # pydantic-core directly: what model_validate wraps, with its defaults.
            # Stored JSON is keyed by field name, as TaskQ dumps it; aliases are read
            # too, for rows other producers wrote the way the model reads them.
            model: P = self.payload_type.__pydantic_validator__.validate_python(
                raw, by_alias=True if stored else None, by_name=True if stored else None
            )
        except ValidationError as exc:
            raise PayloadValidationError(
                f"actor {self.name!r}: payload does not validate against "
                f"{self.payload_type.__qualname__}: {exc}"
            ) from exc
        return model

    def dump_payload(self, payload: P | Mapping[str, Any]) -> dict[str, JSON]:
        """The JSON object stored for ``payload`` (a model instance or a dict that validates).

        Dumped through the actor's payload type, by field name. The dump is
        validated again, as the worker will read it, so a payload the worker
        would refuse is refused here, before anything is written (unless the
        payload is a dict equal to its dump: that validated already).
        """
        # pydantic-core directly (what model_validate / model_dump wrap): half the
        # cost. Any failure is redone below for its message.
        validate = self.payload_type.__pydantic_validator__.validate_python
        try:
            dumped: dict[str, JSON] = self._payload_serializer.to_python(
                validate(payload), mode="json", by_alias=False
            )
            if not _validated_as_given(payload, dumped):
                validate(dumped, by_alias=False, by_name=True)
        except ValueError:  # ValidationError, PydanticSerializationError, bad bytes, depth
            return self._dump_payload_checked(payload)
        return dumped

    def _dump_payload_checked(self, payload: P | Mapping[str, Any]) -> dict[str, JSON]:
        """:meth:`dump_payload` again, raising the named errors."""
        model = self.validate_payload(payload)
        try:
            dumped: dict[str, JSON] = self._payload_serializer.to_python(
                model, mode="json", by_alias=False
            )
        except ValueError as exc:
            problem = dump_problem(
                exc, lambda: self._payload_serializer.to_python(model, by_alias=False)
            )
            raise PayloadValidationError(
                f"actor {self.name!r}: payload cannot be dumped to JSON: {problem}"
            ) from exc
        self.load_payload(dumped)
        return dumped

    def dump_payloads(self, payloads: Sequence[P | Mapping[str, Any]]) -> list[dict[str, JSON]]:
        """:meth:`dump_payload` of each payload, in order, with the same checks.

        The batch form calls pydantic-core directly (what ``model_validate``
        and ``model_dump`` wrap), a third of the per-payload cost. The first
        payload that fails is dumped again by :meth:`dump_payload` for its
        error, ``PayloadValidationError`` prefixed with ``payload #<index>``.
        """
        validate = self.payload_type.__pydantic_validator__.validate_python
        to_python = self._payload_serializer.to_python
        dumped: list[dict[str, JSON]] = []
        append = dumped.append
        try:
            for payload in payloads:
                value = to_python(validate(payload), mode="json", by_alias=False)
                if not _validated_as_given(payload, value):
                    validate(value, by_alias=False, by_name=True)  # as the worker will read it
                append(value)
        except ValueError:  # as in dump_payload
            pass
        else:
            return dumped
        for index in range(len(dumped), len(payloads)):
            try:
                dumped.append(self.dump_payload(payloads[index]))
            except PayloadValidationError as exc:
                raise PayloadValidationError(f"payload #{index}: {exc}") from exc
        return dumped

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
        if ctx is None and self.wants_context:
            raise TypeError(f"actor {self.name!r} takes a JobContext; none was given")
        if deps or self.dependencies:  # most actors have none: nothing to check or resolve
            declared = set(self.dependencies)
            if set(deps) != declared:
                raise TypeError(
                    f"actor {self.name!r} declares dependencies {sorted(declared)}, "
                    f"got {sorted(deps)}"
                )
        if self.is_async:
            args, kwargs = self._arguments(
                payload, ctx, resolve_thread_locals(deps) if deps else {}
            )
            result = await self.fn(*args, **kwargs)
        elif executor is None:
            result = await asyncio.to_thread(self._call_in_thread, payload, ctx, deps)
        else:
            call = functools.partial(
                contextvars.copy_context().run, self._call_in_thread, payload, ctx, deps
            )
            result = await asyncio.get_running_loop().run_in_executor(executor, call)
        if not self.is_async and inspect.isawaitable(result):
            result = await result  # a sync wrapper around an async function
        return cast(R, result)

    def _call_in_thread(
        self, payload: P, ctx: JobContext[P] | None, deps: Mapping[str, object]
    ) -> Any:
        args, kwargs = self._arguments(payload, ctx, resolve_thread_locals(deps))
        return self.fn(*args, **kwargs)

    def _arguments(
        self, payload: P, ctx: JobContext[P] | None, deps: Mapping[str, object]
    ) -> tuple[list[object], dict[str, object]]:
        args: list[object] = [payload]
        kwargs: dict[str, object] = {}
        for param in self._signature.plan:
            value = ctx if param.role == "context" else deps[param.name]
            if param.positional_only:
                args.append(value)
            else:
                kwargs[param.name] = value
        return args, kwargs

    # -- results ----------------------------------------------------------------------

    def dump_result(self, result: R) -> JSON:
        """The JSON stored for ``result``; ``TypeError`` if it is not the declared type,
        ``ValueError`` if no store can keep it (NaN or infinity, a NUL character)."""
        if result is None and self._returns_none:
            return None  # the usual result: nothing to validate or dump
        what = f"the result of actor {self.name!r}"
        try:
            value = self._result_adapter.validate_python(result)
            dumped: JSON = self._result_serializer.to_python(value, mode="json", by_alias=False)
        except (ValidationError, PydanticSerializationError) as exc:
            raise TypeError(
                f"actor {self.name!r} returned a {type(result).__name__} that is not a valid "
                f"{self._result_label}: {exc}"
            ) from exc
        except ValueError as exc:  # bytes that are not UTF-8, too deep
            problem = dump_problem(exc, lambda: self._result_serializer.to_python(value), "result")
            raise ValueError(f"{what} cannot be stored: {problem}") from exc
        if dumped is not None:
            # Refused here, where it fails the job for good with a reason, not at the write
            # (which would also hold back the other jobs of its batch).
            text = pydantic_core.to_json(dumped, inf_nan_mode="constants").decode()
            if "NaN" in text or "Infinity" in text:  # or only inside a string: look
                where = find_unstorable(dumped, "result")
                if where is not None:
                    raise ValueError(f"{what} cannot be stored: {where}")
            check_json_text(text, what)
        return dumped

    def load_result(self, raw: JSON) -> R:
        """The typed result for stored JSON ``raw``; ``ValueError`` if it does not validate."""
        try:
            return cast(R, self._result_adapter.validate_python(raw, by_alias=True, by_name=True))
        except ValidationError as exc:
            raise ValueError(
                f"actor {self.name!r}: stored result is not a valid {self._result_label}: {exc}"
            ) from exc

    @property
    def _result_label(self) -> str:
        tp = self.result_type
        return "None" if tp is None else getattr(tp, "__qualname__", repr(tp))

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
        self,
        payload: P | Mapping[str, Any],
        *,
        queue: str | None = None,
        scheduled_at: datetime | None = None,
        priority: int = 0,
        schedule_to_close: datetime | None = None,
        identity_key: str | None = None,
        fairness_key: str | None = None,
        idempotency_key: str | None = None,
        metadata: Mapping[str, JSON] | None = None,
        tags: Iterable[str] = (),
        trace_id: str | None = None,
        span_id: str | None = None,
        timeout: timedelta | None = None,
        now: datetime,
    ) -> NewJob:
        """The job to enqueue for ``payload`` at ``now``.

        Validates and dumps the payload (``PayloadValidationError``), stores
        ``retry.job_max_attempts``, and turns an indefinite policy's
        ``time_budget`` into the deadline (the earlier of it and
        ``schedule_to_close``). ``timeout`` is stored with the job and bounds
        each of its attempts instead of the actor's ``timeout``. Bad options
        raise ``TypeError``/``ValueError``.
        """
        dumped = self.dump_payload(payload)
        if priority.__class__ is not int and (
            isinstance(priority, bool) or not isinstance(priority, int)
        ):
            raise TypeError(f"priority must be an int, got {priority!r}")
        tag_tuple = () if tags == () else _tags(tags)
        if (
            identity_key is not None
            or fairness_key is not None
            or idempotency_key is not None
            or trace_id is not None
            or span_id is not None
        ):
            _check_texts(
                identity_key=identity_key,
                fairness_key=fairness_key,
                idempotency_key=idempotency_key,
                trace_id=trace_id,
                span_id=span_id,
            )
        if queue is not None and (not isinstance(queue, str) or not queue):
            raise ValueError(f"queue must be a non-empty string, got {queue!r}")
        if timeout is not None:
            problem = timeout_problem(timeout)
            if problem is not None:
                error = TypeError if not isinstance(timeout, timedelta) else ValueError
                raise error(f"timeout {problem}")
        _check_aware(now, "now")
        retry = self.retry
        if schedule_to_close is not None:
            _check_aware(schedule_to_close, "schedule_to_close")
        deadline = deadline_at_enqueue(retry, enqueued_at=now, schedule_to_close=schedule_to_close)
        if scheduled_at is not None:
            _check_aware(scheduled_at, "scheduled_at")
            if deadline is not None and deadline <= scheduled_at:
                _refuse_unrunnable(scheduled_at, deadline, schedule_to_close)
        return build_new_job(
            actor=self.name,
            queue=queue if queue is not None else self.queue,
            payload=dumped,
            priority=priority,
            scheduled_at=scheduled_at,
            schedule_to_close=deadline,
            max_attempts=retry.job_max_attempts,
            identity_key=identity_key,
            fairness_key=fairness_key,
            idempotency_key=idempotency_key,
            # A fresh dict either way: stores may keep it.
            metadata=json_copy(dict(metadata), "metadata") if metadata else {},
            tags=tag_tuple,
            trace_id=trace_id,
            span_id=span_id,
            max_pending=self.max_pending,
            attempt_timeout=timeout,
        )


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
        return ActorRef(
            func,
            signature=inspect_actor(func, localns=localns),
            name=name,
            queue=queue,
            retry=retry,
            max_concurrent=max_concurrent,
            max_pending=max_pending,
            result_ttl=result_ttl,
            timeout=timeout,
            metadata=metadata,
            rate_limits=rate_limits,
            reservations=reservations,
        )

    if fn is not None:
        return decorate(fn, _caller_locals(1))

    def with_options(func: Callable[..., Any]) -> ActorRef[Any, Any]:
        return decorate(func, _caller_locals(1))

    return with_options


# -- registries -------------------------------------------------------------------------


def _check_member(value: object, where: str) -> ActorRef[Any, Any]:
    if not isinstance(value, ActorRef):
        raise RegistryError(f"{where} is a {type(value).__name__}, not an ActorRef (use @actor)")
    return value


def registry_from(obj: object) -> dict[str, ActorRef[Any, Any]]:
    """The ``{name: ActorRef}`` registry described by ``obj``.

    ``obj`` is a ``Mapping[str, ActorRef]`` whose keys equal the actors'
    names, or a list/tuple of ``ActorRef``. Anything else raises
    :class:`RegistryError`: in particular a generator or iterator (it can be
    read only once, so a second pass would silently see no actors) and a set
    (no stable order). Duplicate names are refused too.
    """
    if isinstance(obj, ActorRef):
        raise RegistryError(
            f"the registry is a single actor ({obj.name!r}); wrap it in a list: [{obj.name}]"
        )
    if isinstance(obj, Mapping):
        registry: dict[str, ActorRef[Any, Any]] = {}
        for key, value in obj.items():
            ref = _check_member(value, f"registry entry {key!r}")
            if key != ref.name:
                raise RegistryError(
                    f"registry key {key!r} does not match the actor's name {ref.name!r}"
                )
            registry[key] = ref
        return registry
    if isinstance(obj, list | tuple):
        registry = {}
        for index, value in enumerate(obj):
            ref = _check_member(value, f"registry item {index}")
            if ref.name in registry:
                raise RegistryError(f"two actors in the registry are named {ref.name!r}")
            registry[ref.name] = ref
        return registry
    if isinstance(obj, Iterator):
        raise RegistryError(
            f"the registry is a one-shot {type(obj).__name__}; it would be exhausted after "
            "one pass and leave the worker with no actors: use a list, a tuple or a Mapping"
        )
    if isinstance(obj, set | frozenset):
        raise RegistryError("the registry is a set; use a list, a tuple or a Mapping")
    raise RegistryError(
        f"the registry must be a Mapping[str, ActorRef] or a list/tuple of ActorRef, "
        f"got {type(obj).__name__}"
    )


def _raised_at(exc: BaseException) -> str:
    """`` (at path:line)`` of the innermost frame of the application's code that raised
    ``exc`` (the import machinery's own frames skipped), or "" when there is none."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if "importlib" not in frame.filename and not frame.filename.startswith("<")
    ]
    if not frames or frames[-1].filename == __file__:
        return ""
    return f" (at {frames[-1].filename}:{frames[-1].lineno})"


def _searched(module_name: str, exc: ModuleNotFoundError, app_dir: str | None) -> str:
    # Only when the registry's own module (or a parent package) is missing, not a
    # dependency it imports: then name where it was looked for and how to point elsewhere.
    missing = exc.name or ""
    if not missing or not (module_name == missing or module_name.startswith(missing + ".")):
        return ""
    where = [entry or os.getcwd() for entry in sys.path if not entry.endswith(".zip")]
    hint = (
        f"; run from the directory that holds {missing.split('.')[0]!r} or pass --app-dir DIR"
        if app_dir is not None
        else ""
    )
    return f" (searched: {', '.join(where)}){hint}"


def load_registry(
    spec: str, app_dir: str | os.PathLike[str] | None = None
) -> dict[str, ActorRef[Any, Any]]:
    """Import ``"package.module:attr"`` (``attr`` may be dotted) and read its registry.

    ``app_dir`` (``taskq`` passes its ``--app-dir``, default the working
    directory) is put first on ``sys.path`` before the import, as uvicorn's
    ``--app-dir`` is. Every failure, including an error raised while importing
    the module, is a :class:`RegistryError` naming ``spec``; a module not found
    names the directories searched.
    """
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise RegistryError(f"actor registry {spec!r} must look like 'package.module:attribute'")
    shown_dir: str | None = None
    if app_dir is not None:
        shown_dir = os.path.abspath(app_dir)
        if not os.path.isdir(shown_dir):
            raise RegistryError(
                f"actor registry {spec!r}: --app-dir {shown_dir} is not a directory"
            )
        if shown_dir not in sys.path:
            sys.path.insert(0, shown_dir)
    try:
        target: object = importlib.import_module(module_name)
    except (SystemExit, KeyboardInterrupt) as exc:
        # e.g. argparse run at import: without this the worker would exit 0, silently.
        raise RegistryError(
            f"actor registry {spec!r}: importing {module_name!r} called sys.exit"
            f"({exc.code!r}){_raised_at(exc)}: a module the worker imports must not exit"
            if isinstance(exc, SystemExit)
            else f"actor registry {spec!r}: importing {module_name!r} raised "
            f"KeyboardInterrupt{_raised_at(exc)}"
        ) from exc
    except ModuleNotFoundError as exc:
        raise RegistryError(
            f"actor registry {spec!r}: cannot import {module_name!r}: "
            f"{type(exc).__name__}: {exc}{_raised_at(exc)}"
            f"{_searched(module_name, exc, shown_dir)}"
        ) from exc
    except Exception as exc:
        raise RegistryError(
            f"actor registry {spec!r}: cannot import {module_name!r}: "
            f"{type(exc).__name__}: {exc}{_raised_at(exc)}"
        ) from exc
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise RegistryError(f"actor registry {spec!r}: no attribute {part!r}") from exc
    try:
        return registry_from(target)
    except RegistryError as exc:
        raise RegistryError(f"actor registry {spec!r}: {exc}") from exc


__all__ = [
    "ActorDecorator",
    "ActorRef",
    "actor",
    "json_copy",
    "load_registry",
    "registry_from",
]
