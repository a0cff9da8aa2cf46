"""The options of ``@actor(...)``, checked once when the decorator runs.

Each bad option is a ``ConfigurationError`` naming the actor, so a typo fails
at import rather than at the first job. Only what a store can keep passes:
names that fit its index, integers its columns hold, metadata it can write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType
from typing import cast

from pydantic import BaseModel

from taskq.app.actors.json_values import json_copy
from taskq.app.actors.limits import check_actor_limits
from taskq.app.unstorable import find_unstorable
from taskq.domain.errors import ConfigurationError
from taskq.domain.job import JSON
from taskq.domain.limits import ConcurrencyLimit, RateLimit
from taskq.domain.retry import RetryPolicy
from taskq.domain.storable import (
    INT32_MAX,
    MAX_NAME_LENGTH,
    MAX_RESULT_TTL,
    text_problem,
    timeout_problem,
)


@dataclass(frozen=True, slots=True)
class ActorOptions:
    """An actor's checked options (defaults filled in, metadata frozen)."""

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


def check_actor_options(
    where: str,
    *,
    name: str,
    queue: str,
    retry: RetryPolicy | None,
    max_concurrent: int | None,
    max_pending: int | None,
    result_ttl: timedelta | None,
    timeout: timedelta | None,
    metadata: Mapping[str, JSON] | None,
    rate_limits: Sequence[RateLimit] | None,
    reservations: Sequence[ConcurrencyLimit] | None,
    payload_type: type[BaseModel],
) -> ActorOptions:
    """The options of the actor ``where`` names; ``ConfigurationError`` for the first bad one.

    ``payload_type`` is what a limit's key template may name.
    """
    if timeout is not None:
        problem = timeout_problem(timeout)
        if problem is not None:
            raise ConfigurationError(f"{where}: timeout {problem}")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"{where}: retry must be a RetryPolicy, got {retry!r}")
    _check_result_ttl(result_ttl, where)
    frozen_metadata = _frozen_metadata(metadata, where)
    limits = check_actor_limits(rate_limits, reservations, payload_type=payload_type, where=where)
    return ActorOptions(
        name=_check_name(name, "name", where),
        queue=_check_name(queue, "queue", where),
        retry=retry if retry is not None else RetryPolicy(),
        max_concurrent=_check_positive(max_concurrent, "max_concurrent", where),
        max_pending=_check_positive(max_pending, "max_pending", where),
        result_ttl=result_ttl,
        timeout=timeout,
        metadata=frozen_metadata,
        rate_limits=limits[0],
        reservations=limits[1],
    )


def _check_result_ttl(result_ttl: object, where: str) -> None:
    if result_ttl is None:
        return
    if not isinstance(result_ttl, timedelta) or result_ttl <= timedelta(0):
        raise ConfigurationError(
            f"{where}: result_ttl must be a positive timedelta or None, got {result_ttl!r}"
        )
    if result_ttl > MAX_RESULT_TTL:
        raise ConfigurationError(
            f"{where}: result_ttl is at most {MAX_RESULT_TTL.days:,} days (about 1,000 "
            f"years, so its expiry stays a time every store holds), got {result_ttl!r}; "
            "result_ttl=None keeps a result until its job is pruned"
        )


def _frozen_metadata(metadata: object, where: str) -> Mapping[str, JSON]:
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ConfigurationError(
            f"{where}: metadata must be a mapping of str to JSON values, got {metadata!r}"
        )
    try:
        copied = json_copy(dict(metadata or {}), "metadata")
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(f"{where}: {exc}") from exc
    unstorable = find_unstorable(copied, "metadata")
    if unstorable is not None:
        raise ConfigurationError(f"{where}: {unstorable}, which no store can keep")
    return MappingProxyType(cast(dict[str, JSON], copied))  # a copy of a dict is a dict


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


__all__ = ["ActorOptions", "check_actor_options"]
