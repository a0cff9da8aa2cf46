"""LeaseJanitor on Postgres: the leader's frequent sweeps."""

from __future__ import annotations

from datetime import datetime, timedelta

from taskq.adapters.postgres.store.base import StoreCore
from taskq.ports.store_params import ReclaimReport


class MaintenanceOps(StoreCore):
    async def promote_scheduled(self, *, now: datetime | None = None) -> int:
        at = self._begin(now)
        promoted: int = await self._driver.fetchval("promote_scheduled", now=at)
        return promoted

    async def reclaim_expired(self, *, now: datetime | None = None) -> ReclaimReport:
        at = self._begin(now)
        rows = await self._driver.fetch("reclaim_expired", now=at)

        def ids(status: str) -> tuple[int, ...]:
            return tuple(row["id"] for row in rows if row["status"] == status)

        return ReclaimReport(
            repended=ids("pending"),
            crashed=ids("crashed"),
            cancelled=ids("cancelled"),
            unstarted=tuple(row["id"] for row in rows if row["unstarted"]),
        )

    async def time_to_lease_expiry(self, *, now: datetime | None = None) -> timedelta | None:
        at = self._begin(now)
        wait: timedelta | None = await self._driver.fetchval("time_to_lease_expiry", now=at)
        return wait

    async def fail_past_deadline(self, *, now: datetime | None = None) -> list[int]:
        at = self._begin(now)
        rows = await self._driver.fetch("fail_past_deadline", now=at)
        return [row["id"] for row in rows]

    async def cleanup_stale_workers(
        self, *, stale_after: timedelta, now: datetime | None = None
    ) -> list[str]:
        at = self._begin(now)
        rows = await self._driver.fetch("cleanup_stale_workers", now=at, stale_after=stale_after)
        return sorted(row["worker_id"] for row in rows)


__all__ = ["MaintenanceOps"]
