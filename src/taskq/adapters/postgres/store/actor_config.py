"""ActorConfigAdmin on Postgres: startup sync, reads, operator capacity changes."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from taskq.adapters.postgres.store.base import StoreCore
from taskq.adapters.postgres.store.rows import actor_config_from_row, dump_json_object
from taskq.domain.actor_config import (
    CAPACITY_FIELDS,
    ActorConfig,
    ActorConfigSyncReport,
    merge_actor_configs,
)
from taskq.domain.errors import ActorConfigDriftList, UnknownActorError
from taskq.domain.storable import check_actor_configs
from taskq.ports.store_params import CapacityUpdate


def _as_stored(config: ActorConfig) -> ActorConfig:
    """``config`` as a row would hold it (metadata normalised through JSON)."""
    return dataclasses.replace(config, metadata=json.loads(dump_json_object(config.metadata)))


class ActorConfigOps(StoreCore):
    async def sync_actor_configs(
        self, configs: Sequence[ActorConfig], *, force: bool = False
    ) -> ActorConfigSyncReport:
        """Compare and write under one transaction-scoped lock, so concurrent syncs take turns."""
        self._begin()
        check_actor_configs(configs)
        registered = [_as_stored(c) for c in configs]
        async with self._driver.transaction() as tx:
            await tx.fetchval("lock_actor_config", lock_key=self._schema.lock_key("actor_config"))
            rows = await tx.fetch("actor_configs", actors=sorted({c.actor for c in registered}))
            table = {row["actor"]: actor_config_from_row(row) for row in rows}
            merge = merge_actor_configs(table, registered)
            created, changed = merge.created, merge.changed
            if merge.drifts and not force:
                raise ActorConfigDriftList(merge.drifts)
            if created:
                new = [table[a] for a in created]
                await tx.execute(
                    "insert_actor_configs",
                    actor=[c.actor for c in new],
                    queue=[c.queue for c in new],
                    metadata=[dump_json_object(c.metadata) for c in new],
                    max_concurrent=[c.max_concurrent for c in new],
                    max_pending=[c.max_pending for c in new],
                    result_ttl=[c.result_ttl for c in new],
                )
            rewritten = [table[a] for a in changed if a not in created]
            if rewritten:
                await tx.execute(
                    "overwrite_actor_structure",
                    actor=[c.actor for c in rewritten],
                    queue=[c.queue for c in rewritten],
                    metadata=[dump_json_object(c.metadata) for c in rewritten],
                )
        return merge.report

    async def get_actor_config(self, actor: str) -> ActorConfig | None:
        self._begin()
        row = await self._driver.fetchrow("actor_configs", actors=[actor])
        return None if row is None else actor_config_from_row(row)

    async def list_actor_configs(self) -> list[ActorConfig]:
        self._begin()
        rows = await self._driver.fetch("actor_configs", actors=None)
        return sorted((actor_config_from_row(row) for row in rows), key=lambda c: c.actor)

    async def set_actor_capacity(self, update: CapacityUpdate) -> ActorConfig:
        self._begin()
        unknown = update.clear - set(CAPACITY_FIELDS)
        if unknown:
            raise ValueError(f"clear names fields that are not capacity fields: {sorted(unknown)}")
        row = await self._driver.fetchrow(
            "set_actor_capacity",
            actor=update.actor,
            max_concurrent=update.max_concurrent,
            max_pending=update.max_pending,
            result_ttl=update.result_ttl,
            clear_max_concurrent="max_concurrent" in update.clear,
            clear_max_pending="max_pending" in update.clear,
            clear_result_ttl="result_ttl" in update.clear,
        )
        if row is None:
            raise UnknownActorError(update.actor)
        return actor_config_from_row(row)


__all__ = ["ActorConfigOps"]
