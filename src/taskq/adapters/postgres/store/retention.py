"""RetentionJanitor on Postgres: archive, archive expiry, result expiry."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from taskq.adapters.postgres.store.base import StoreCore
from taskq.domain.status import TERMINAL, JobStatus
from taskq.ports.store_params import PrunePolicy

#: Archived jobs deleted per statement by ``expire_archive`` (short transactions).
ARCHIVE_BATCH: Final = 10_000


class RetentionOps(StoreCore):
    async def prune(self, policy: PrunePolicy) -> int:
        """Archive every eligible job, ``batch_size`` rows per statement."""
        now = self._begin(policy.now)
        retention = {
            JobStatus(status): keep
            for status, keep in policy.retention.items()
            if JobStatus(status) in TERMINAL
        }
        if not retention:
            return 0
        batch = max(policy.batch_size, 1)
        statuses = sorted(retention)
        total = 0
        while True:
            moved: int = await self._driver.fetchval(
                "prune_batch",
                now=now,
                statuses=[s.value for s in statuses],
                retentions=[retention[s] for s in statuses],
                batch_size=batch,
                archive_retention=policy.archive_retention,
            )
            total += moved
            # A short batch means nothing eligible is left (or the rest is locked right
            # now and waits for the next sweep).
            if moved < batch:
                return total

    async def expire_archive(self, *, now: datetime | None = None) -> int:
        """Delete every expired archived job, ``ARCHIVE_BATCH`` per statement."""
        at = self._begin(now)
        total = 0
        while True:
            expired: int = await self._driver.fetchval(
                "expire_archive_batch", now=at, batch_size=ARCHIVE_BATCH
            )
            total += expired
            if expired < ARCHIVE_BATCH:
                return total

    async def expire_results(self, *, now: datetime | None = None) -> int:
        at = self._begin(now)
        cleared: int = await self._driver.fetchval("expire_results", now=at)
        return cleared


__all__ = ["RetentionOps"]
