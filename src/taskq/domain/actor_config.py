"""Per-actor stored configuration and per-queue dispatch modes.

Capacity fields (``max_concurrent``, ``max_pending``, ``result_ttl``) are
operator-owned: the registered literal only seeds a new row. Structural fields
(``queue``, ``metadata``) are checked for drift at worker start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum

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
