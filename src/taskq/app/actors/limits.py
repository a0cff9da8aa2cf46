"""Checks of ``@actor(rate_limits=..., reservations=...)`` when the decorator runs.

The value types validate themselves (:mod:`taskq.domain.limits`); what only
the actor can check is here: the option's shape, that a key template names
fields the payload model has, and that one actor does not declare the same
limit twice (it would count each job twice, and a duplicated reservation of
capacity 1 could never be granted).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from pydantic import BaseModel

from taskq.domain.errors import ConfigurationError
from taskq.domain.limits import ConcurrencyLimit, RateLimit, describe_key

L = TypeVar("L", RateLimit, ConcurrencyLimit)

_OTHER_OPTION = {RateLimit: "rate_limits", ConcurrencyLimit: "reservations"}


def _items(value: object, option: str, kind: type[L], where: str) -> tuple[L, ...]:
    if value is None:
        return ()
    if isinstance(value, RateLimit | ConcurrencyLimit):
        raise ConfigurationError(
            f"{where}: {option} must be a list, got a single {value!r}; "
            f"wrap it in a list: {option}=[...]"
        )
    if isinstance(value, str | bytes | Mapping | Iterator) or not isinstance(value, Sequence):
        raise ConfigurationError(
            f"{where}: {option} must be a list or tuple of {kind.__name__}, "
            f"got {type(value).__name__}"
        )
    items: list[L] = []
    for index, item in enumerate(value):
        if not isinstance(item, kind):
            hint = ""
            other = _OTHER_OPTION.get(type(item))
            if other is not None:
                hint = f" (a {type(item).__name__} belongs in {other}=)"
            raise ConfigurationError(
                f"{where}: {option}[{index}] must be a {kind.__name__}, got {item!r}{hint}"
            )
        items.append(item)
    return tuple(items)


def _check_fields(
    limit: RateLimit | ConcurrencyLimit, option: str, payload_type: type[BaseModel], where: str
) -> None:
    known = set(payload_type.model_fields) | set(payload_type.model_computed_fields)
    missing = [name for name in limit.template_fields if name not in known]
    if missing:
        raise ConfigurationError(
            f"{where}: {option} key {describe_key(limit.key)!r} names "
            f"{', '.join(repr(m) for m in missing)}, which "
            f"{payload_type.__qualname__} does not have (fields: {sorted(known)})"
        )


def check_actor_limits(
    rate_limits: object,
    reservations: object,
    *,
    payload_type: type[BaseModel],
    where: str,
) -> tuple[tuple[RateLimit, ...], tuple[ConcurrencyLimit, ...]]:
    """The validated ``(rate_limits, reservations)`` of one actor, as tuples.

    Raises ``ConfigurationError`` naming the actor and the offending option.
    """
    rates = _items(rate_limits, "rate_limits", RateLimit, where)
    slots = _items(reservations, "reservations", ConcurrencyLimit, where)
    seen_rates: set[object] = set()
    for rate in rates:
        _check_fields(rate, "rate_limits", payload_type, where)
        if (rate.key, rate.per) in seen_rates:
            raise ConfigurationError(
                f"{where}: rate_limits declares key {describe_key(rate.key)!r} per {rate.per} "
                "twice; each job would count against it twice"
            )
        seen_rates.add((rate.key, rate.per))
    seen_slots: set[object] = set()
    for slot in slots:
        _check_fields(slot, "reservations", payload_type, where)
        if slot.key in seen_slots:
            raise ConfigurationError(
                f"{where}: reservations declares key {describe_key(slot.key)!r} twice; "
                "each job would hold two of its slots"
            )
        seen_slots.add(slot.key)
    return rates, slots


__all__ = ["check_actor_limits"]
