"""ActorConfigAdmin and QueueAdmin for the memory store."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from taskq.adapters.memory.rows import to_json_object
from taskq.adapters.memory.store_base import StoreCore
from taskq.domain.actor_config import (
    CAPACITY_FIELDS,
    ActorConfig,
    ActorConfigSyncReport,
    QueueMode,
    merge_actor_configs,
)
from taskq.domain.errors import ActorConfigDriftList, UnknownActorError
from taskq.domain.storable import check_actor_configs, check_queue_mode
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
        check_actor_configs(configs)
        # Work on a copy and commit at the end: a drift refusal writes nothing.
        table = dict(self._db.actor_configs)
        merge = merge_actor_configs(table, map(_stored, configs))
        if merge.drifts and not force:
            raise ActorConfigDriftList(merge.drifts)
        self._db.actor_configs = table
        return merge.report

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
        check_queue_mode(queue)
        self._db.queue_modes[queue] = QueueMode(mode)

    async def queue_modes(self) -> dict[str, QueueMode]:
        await self._begin()
        return dict(sorted(self._db.queue_modes.items()))
