"""QueueAdmin on Postgres: dispatch modes per queue."""

from __future__ import annotations

from taskq.adapters.postgres.store.base import StoreCore
from taskq.domain.actor_config import QueueMode
from taskq.domain.storable import check_queue_mode


class QueueOps(StoreCore):
    async def set_queue_mode(self, queue: str, mode: QueueMode) -> None:
        self._begin()
        check_queue_mode(queue)
        await self._driver.execute("set_queue_mode", queue=queue, mode=QueueMode(mode).value)

    async def queue_modes(self) -> dict[str, QueueMode]:
        self._begin()
        rows = await self._driver.fetch("queue_modes")
        return dict(sorted((row["name"], QueueMode(row["mode"])) for row in rows))


__all__ = ["QueueOps"]
