"""Per-actor stored configuration and per-queue dispatch modes.

Capacity fields (``max_concurrent``, ``max_pending``, ``result_ttl``) are
operator-owned: the registered literal only seeds a new row. Structural fields
(``queue``, ``metadata``) are checked for drift at worker start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum

from taskq.domain.errors import ActorConfigDriftError
from taskq.domain.job import JSON

STRUCTURAL_FIELDS: tuple[str, ...] = ("queue", "metadata")
CAPACITY_FIELDS: tuple[str, ...] = ("max_concurrent", "max_pending", "result_ttl")


class QueueMode(StrEnum):
    STRICT_FIFO = "strict_fifo"
    ROUND_ROBIN = "round_robin"


@dataclass(frozen=True, slots=True, kw_only=True)
class ActorConfig:
    """One ``actor_config`` row. ``None`` capacity means unlimited / the code literal."""

    actor: str
    queue: str
    metadata: Mapping[str, JSON] = field(default_factory=dict)
    max_concurrent: int | None = None
    max_pending: int | None = None
    result_ttl: timedelta | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityOverride:
    """A registered capacity literal that differs from the stored, operator-owned value."""

    actor: str
    field: str
    stored: object
    registered: object


@dataclass(frozen=True, slots=True, kw_only=True)
class ActorConfigSyncReport:
    """What a sync did: rows created, capacity overrides seen, structural fields overwritten."""

    created: tuple[str, ...] = ()
    capacity_overrides: tuple[CapacityOverride, ...] = ()
    overwritten: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ActorConfigMerge:
    """The outcome of :func:`merge_actor_configs`: the report, and what a store must write.

    ``created`` and ``changed`` (structure overwritten) are actor names in
    input order; ``drifts`` is what a sync without ``force`` refuses with.
    """

    report: ActorConfigSyncReport
    created: list[str]
    changed: list[str]
    drifts: list[ActorConfigDriftError]


def merge_actor_configs(
    table: dict[str, ActorConfig], registered: Iterable[ActorConfig]
) -> ActorConfigMerge:
    """The startup sync rules over ``table`` (updated in place, in input order).

    A new actor's row is created from its registration; a stored row keeps
    its operator-owned capacity (a differing literal is reported as an
    override) and takes the registered structural fields (each difference is
    a drift, and is overwritten).
    """
    created: list[str] = []
    changed: list[str] = []
    overrides: list[CapacityOverride] = []
    drifts: list[ActorConfigDriftError] = []
    overwritten: list[tuple[str, str]] = []
    for config in registered:
        stored = table.get(config.actor)
        if stored is None:
            table[config.actor] = config
            created.append(config.actor)
            continue
        for name in CAPACITY_FIELDS:
            was, now = getattr(stored, name), getattr(config, name)
            if was != now:
                overrides.append(
                    CapacityOverride(actor=stored.actor, field=name, stored=was, registered=now)
                )
        changes: dict[str, object] = {}
        for name in STRUCTURAL_FIELDS:
            was, now = getattr(stored, name), getattr(config, name)
            if was != now:
                drifts.append(ActorConfigDriftError(stored.actor, name, was, now))
                overwritten.append((stored.actor, name))
                changes[name] = now
        if changes:
            table[stored.actor] = dataclasses.replace(stored, **changes)  # type: ignore[arg-type]
            if stored.actor not in changed:
                changed.append(stored.actor)
    report = ActorConfigSyncReport(
        created=tuple(created),
        capacity_overrides=tuple(overrides),
        overwritten=tuple(overwritten),
    )
    return ActorConfigMerge(report=report, created=created, changed=changed, drifts=drifts)
