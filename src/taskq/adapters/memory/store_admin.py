"""ActorConfigAdmin and QueueAdmin for the memory store."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from taskq.adapters.memory.rows import to_json_object
from taskq.adapters.memory.store_base import StoreCore
from taskq.domain.actor_config import (
    CAPACITY_FIELDS,
    STRUCTURAL_FIELDS,
    ActorConfig,
    ActorConfigSyncReport,
    CapacityOverride,
    QueueMode,
)
from taskq.domain.errors import ActorConfigDriftError, ActorConfigDriftList, UnknownActorError
from taskq.ports.store_params import CapacityUpdate


def _stored(config: ActorConfig) -> ActorConfig:
    """``config`` as a row would hold it (metadata normalised and copied)."""
    return dataclasses.replace(config, metadata=to_json_object(config.metadata))


class AdminOps(StoreCore):
    # --- ActorConfigAdmin -----------------------------------------------------------

    async def sync_actor_configs(
        self, configs: Sequence[ActorConfig], *, force: bool = False
    ) -> ActorConfigSyncReport:
        await self._begin()
        # Work on a copy and commit at the end: a drift refusal writes nothing.
        table = dict(self._db.actor_configs)
        created: list[str] = []
        overrides: list[CapacityOverride] = []
        drifts: list[ActorConfigDriftError] = []
        overwritten: list[tuple[str, str]] = []
        for registered in map(_stored, configs):
            stored = table.get(registered.actor)
            if stored is None:
                table[registered.actor] = registered
                created.append(registered.actor)
                continue
            for name in CAPACITY_FIELDS:
                was, now = getattr(stored, name), getattr(registered, name)
                if was != now:
                    overrides.append(
                        CapacityOverride(actor=stored.actor, field=name, stored=was, registered=now)
                    )
            changes: dict[str, object] = {}
            for name in STRUCTURAL_FIELDS:
                was, now = getattr(stored, name), getattr(registered, name)
                if was != now:
                    drifts.append(ActorConfigDriftError(stored.actor, name, was, now))
                    overwritten.append((stored.actor, name))
                    changes[name] = now
            if changes:
                table[stored.actor] = dataclasses.replace(stored, **changes)  # type: ignore[arg-type]
        if drifts and not force:
            raise ActorConfigDriftList(drifts)
        self._db.actor_configs = table
        return ActorConfigSyncReport(
            created=tuple(created),
            capacity_overrides=tuple(overrides),
            overwritten=tuple(overwritten),
        )

    async def get_actor_config(self, actor: str) -> ActorConfig | None:
        await self._begin()
        config = self._db.actor_configs.get(actor)
        return None if config is None else _stored(config)

    async def list_actor_configs(self) -> list[ActorConfig]:
        await self._begin()
        return [_stored(self._db.actor_configs[a]) for a in sorted(self._db.actor_configs)]

    async def set_actor_capacity(self, update: CapacityUpdate) -> ActorConfig:
        await self._begin()
        unknown = update.clear - set(CAPACITY_FIELDS)
        if unknown:
            raise ValueError(f"clear names fields that are not capacity fields: {sorted(unknown)}")
        config = self._db.actor_configs.get(update.actor)
        if config is None:
            raise UnknownActorError(update.actor)
        changes: dict[str, object] = {}
        for name in CAPACITY_FIELDS:
            if name in update.clear:
                changes[name] = None
            elif (value := getattr(update, name)) is not None:
                changes[name] = value
        config = dataclasses.replace(config, **changes)  # type: ignore[arg-type]
        self._db.actor_configs[update.actor] = config
        return _stored(config)

    # --- QueueAdmin -----------------------------------------------------------------

    async def set_queue_mode(self, queue: str, mode: QueueMode) -> None:
        await self._begin()
        self._db.queue_modes[queue] = QueueMode(mode)

    async def queue_modes(self) -> dict[str, QueueMode]:
        await self._begin()
        return dict(sorted(self._db.queue_modes.items()))
