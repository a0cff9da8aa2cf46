"""Rate limits and concurrency reservations an actor declares.

::

    @actor(
        rate_limits=[RateLimit("openai", limit=60, per=timedelta(minutes=1))],
        reservations=[ConcurrencyLimit("tenant:{tenant_id}", capacity=2)],
    )

- :class:`RateLimit`: at most ``limit`` job starts per fixed window ``per``
  (windows aligned to the epoch) for the key, across all workers.
- :class:`ConcurrencyLimit`: at most ``capacity`` jobs hold the key at once,
  across all workers; a job holds it from just before its actor is invoked
  until the invocation ends (or the reservation's lease runs out).

A key is one of:

- a plain string: ``"openai"``, one budget for every job;
- a template: a string with ``{field}`` placeholders naming payload fields,
  ``"tenant:{tenant_id}"``, filled with ``str.format`` from the validated
  payload (``{{`` and ``}}`` are literal braces; a format spec such as
  ``{n:03d}`` is allowed; attribute and index access are not);
- a callable taking the validated payload and returning the key string,
  ``lambda p: f"tenant:{p.tenant_id.lower()}"``.

Actors that resolve the same key share one budget, so declare a shared key
identically everywhere. Resolved keys are namespaced before they reach the
limiter (:meth:`RateLimit.key_for`, :meth:`ConcurrencyLimit.key_for`): a rate
key carries its window length (``rate:60s:openai``) so windows of different
lengths never share a count, and a reservation key starts with
``reservation:``, so rate keys and reservation keys never collide.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

from taskq.domain.errors import ConfigurationError, PayloadValidationError
from taskq.domain.storable import MAX_KEY_LENGTH, text_problem

#: A limit key: a plain string, a ``{field}`` template, or ``payload -> str``.
LimitKey = str | Callable[[Any], str]

RATE_KEY_PREFIX: Final = "rate:"
RESERVATION_KEY_PREFIX: Final = "reservation:"

_ONE_US: Final = timedelta(microseconds=1)
_FORMATTER: Final = string.Formatter()


def _template_fields(key: str, where: str) -> tuple[str, ...]:
    """The payload fields a key template names (empty for a plain string)."""
    try:
        parsed = list(_FORMATTER.parse(key))
    except ValueError as exc:
        raise ConfigurationError(f"{where}: key {key!r} is not a valid template: {exc}") from exc
    names: list[str] = []
    for _, name, spec, _ in parsed:
        if name is None:
            continue
        if not name or name.isdigit():
            raise ConfigurationError(
                f"{where}: key {key!r} has a positional placeholder; name a payload field, "
                "as in 'tenant:{tenant_id}'"
            )
        if not name.isidentifier():
            raise ConfigurationError(
                f"{where}: key {key!r} placeholder {{{name}}} must be a plain payload field "
                "name (no attribute or index access; use a callable key for that)"
            )
        if spec and "{" in spec:
            raise ConfigurationError(
                f"{where}: key {key!r} placeholder {{{name}}} has a nested placeholder "
                "in its format spec"
            )
        if name not in names:
            names.append(name)
    return tuple(names)


def _check_key(key: object, where: str) -> tuple[str, ...]:
    if isinstance(key, str):
        if not key or key.strip() != key:
            raise ConfigurationError(
                f"{where}: key must be a non-empty string without surrounding spaces "
                f"(or a callable), got {key!r}"
            )
        return _template_fields(key, where)
    if callable(key):
        return ()
    raise ConfigurationError(
        f"{where}: key must be a string, a '{{field}}' template or a callable "
        f"taking the payload, got {type(key).__name__} {key!r}"
    )


def _check_count(value: object, what: str, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{where}: {what} must be an int >= 1, got {value!r}")


def _field_value(payload: Any, name: str) -> Any:
    if isinstance(payload, Mapping):
        return payload[name]
    return getattr(payload, name)


def describe_key(key: LimitKey) -> str:
    """A short label for a key in logs and errors (a callable by its qualified name)."""
    if isinstance(key, str):
        return key
    return getattr(key, "__qualname__", None) or repr(key)


def _where(kind: str, key: object) -> str:
    label = repr(key) if isinstance(key, str) or not callable(key) else describe_key(key)
    return f"{kind}({label})"


def _resolve(key: LimitKey, fields: tuple[str, ...], payload: Any, owner: str) -> str:
    """The key for ``payload``; ``PayloadValidationError`` when it cannot be made.

    A key that cannot be built for a payload will not be built on a retry
    either, so it is a property of the payload, never retried.
    """
    what = f"{owner} key {describe_key(key)!r}"
    try:
        if isinstance(key, str):
            if not fields:
                return key
            resolved: object = key.format_map({f: _field_value(payload, f) for f in fields})
        else:
            resolved = key(payload)
    except Exception as exc:
        raise PayloadValidationError(
            f"{what} cannot be resolved for this payload: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(resolved, str) or not resolved:
        raise PayloadValidationError(
            f"{what} must resolve to a non-empty string, got {type(resolved).__name__} {resolved!r}"
        )
    # A key the limiter's store cannot keep would fail every try (a snooze each time,
    # forever): it is the payload's fault, so the job fails instead.
    if len(resolved) > MAX_KEY_LENGTH:
        raise PayloadValidationError(
            f"{what} resolves to {len(resolved):,} characters for this payload; at most "
            f"{MAX_KEY_LENGTH} fit a store's index"
        )
    problem = text_problem(resolved)
    if problem is not None:
        raise PayloadValidationError(f"{what} resolves to text that {problem}")
    return resolved


def _span(per: timedelta) -> str:
    """``per`` as a compact, exact label: ``60s``, ``1500ms``, ``250us``."""
    us = per // _ONE_US
    for unit, size in (("s", 1_000_000), ("ms", 1_000)):
        if us % size == 0:
            return f"{us // size}{unit}"
    return f"{us}us"


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``limit`` starts per fixed window ``per`` for ``key``, across all workers.

    Windows are aligned to the epoch (``floor(now / per)``), so a burst of up
    to ``2 * limit`` can straddle a window boundary. A job denied a permit is
    snoozed until the window ends; it does not use an attempt.
    """

    key: LimitKey
    limit: int = field(kw_only=True)
    per: timedelta = field(kw_only=True)
    _fields: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = _where("RateLimit", self.key)
        object.__setattr__(self, "_fields", _check_key(self.key, where))
        _check_count(self.limit, "limit", where)
        if not isinstance(self.per, timedelta) or self.per <= timedelta(0):
            raise ConfigurationError(f"{where}: per must be a positive timedelta, got {self.per!r}")

    @property
    def template_fields(self) -> tuple[str, ...]:
        """The payload fields the key template names (empty for a plain or callable key)."""
        return self._fields

    def key_for(self, payload: Any) -> str:
        """The namespaced limiter key for ``payload``: ``rate:<per>:<key>``.

        Raises ``PayloadValidationError`` when the key cannot be built.
        """
        resolved = _resolve(self.key, self._fields, payload, "rate limit")
        return f"{RATE_KEY_PREFIX}{_span(self.per)}:{resolved}"


@dataclass(frozen=True, slots=True)
class ConcurrencyLimit:
    """At most ``capacity`` jobs hold ``key`` at once, across all workers.

    A job reserves a slot before its actor is invoked and releases it when the
    invocation ends; a worker that dies leaves its slots to expire with their
    lease. A job that finds no free slot is snoozed briefly, without using an
    attempt.
    """

    key: LimitKey
    capacity: int = field(kw_only=True)
    _fields: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = _where("ConcurrencyLimit", self.key)
        object.__setattr__(self, "_fields", _check_key(self.key, where))
        _check_count(self.capacity, "capacity", where)

    @property
    def template_fields(self) -> tuple[str, ...]:
        """The payload fields the key template names (empty for a plain or callable key)."""
        return self._fields

    def key_for(self, payload: Any) -> str:
        """The namespaced limiter key for ``payload``: ``reservation:<key>``.

        Raises ``PayloadValidationError`` when the key cannot be built.
        """
        resolved = _resolve(self.key, self._fields, payload, "reservation")
        return f"{RESERVATION_KEY_PREFIX}{resolved}"


__all__ = [
    "RATE_KEY_PREFIX",
    "RESERVATION_KEY_PREFIX",
    "ConcurrencyLimit",
    "LimitKey",
    "RateLimit",
    "describe_key",
]
